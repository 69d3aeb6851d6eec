// The checkpoint file layer: SHA-256 against the NIST known answers, the safetensors writer and strict reader
// (round trips, a file built byte by byte, every truncation, every header bit flip, hand-made attacks each
// refused with its own message), and atomic file writing under failures.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QTemporaryDir>
#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "test_support.h"
#include "unet/core/error.h"
#include "unet/io/atomic_file.h"
#include "unet/io/safetensors.h"
#include "unet/io/sha256.h"

using namespace unet;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto b = std::as_bytes(std::span(text.data(), text.size()));
  return {b.begin(), b.end()};
}

std::vector<std::byte> qbytes_of(const QByteArray& text) {
  return bytes_of(std::string_view(text.data(), text.size()));
}

void append(std::vector<std::byte>& out, std::span<const std::byte> more) {
  out.insert(out.end(), more.begin(), more.end());
}

std::vector<std::byte> le64(std::uint64_t v) {
  std::vector<std::byte> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
  return out;
}

// A file with the given header JSON (its length field computed) and `data_bytes` zero bytes of data.
std::vector<std::byte> file_with_header(std::string_view header, std::size_t data_bytes) {
  std::vector<std::byte> file = le64(header.size());
  append(file, bytes_of(header));
  file.resize(file.size() + data_bytes, std::byte{0});
  return file;
}

struct Outcome {
  bool accepted = false;
  ErrorKind kind = ErrorKind::io;
  std::string message;
  std::optional<SafetensorsFile> file;
};

// Parses; a unet::Error becomes the outcome, any other exception escapes and fails the test.
Outcome try_parse(std::vector<std::byte> bytes, const ReadLimits& limits = {}) {
  Outcome out;
  try {
    out.file = SafetensorsFile::parse(std::move(bytes), "hostile.safetensors", limits);
    out.accepted = true;
  } catch (const Error& e) {
    out.kind = e.kind();
    out.message = e.what();
  }
  return out;
}

void write_plain(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

std::vector<std::string> folder_listing(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// The tensors of the round-trip cases; they own their bytes so that the writer's references stay valid.
struct TensorCase {
  std::string name;
  StDType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 37 + seed * 11 + 5) & 0xff);
  return out;
}

std::vector<TensorCase> round_trip_case(int id, std::map<std::string, std::string>& metadata) {
  std::vector<TensorCase> t;
  const auto add = [&](std::string name, StDType dtype, std::vector<std::int64_t> shape) {
    std::size_t n = st_dtype_size(dtype);
    for (const auto d : shape) n *= static_cast<std::size_t>(d);
    t.push_back({std::move(name), dtype, std::move(shape), pattern(n, static_cast<unsigned>(t.size()))});
  };
  switch (id) {
    case 0:  // every dtype the engine uses, a scalar and an empty tensor
      add("enc.0.conv.weight", StDType::F32, {3, 3, 2, 4});
      add("enc.0.conv.bias", StDType::F32, {4});
      add("half", StDType::F16, {5});
      add("brain", StDType::BF16, {1, 3});
      add("double", StDType::F64, {2});
      add("i64", StDType::I64, {3});
      add("i32", StDType::I32, {2, 2});
      add("i16", StDType::I16, {7});
      add("i8", StDType::I8, {9});
      add("u8", StDType::U8, {3});
      add("mask", StDType::BOOL, {2});
      add("scalar", StDType::F32, {});
      add("empty", StDType::F32, {0, 5});
      metadata = {
          {"format", "unet-workbench/1"}, {"step", "1200"}, {"config", "{\"a\": [1, 2], \"b\": \"x\\ny\"}"}};
      break;
    case 1:  // nothing at all
      break;
    case 2:  // names and metadata that need escaping, non-ASCII
      add("optimizer.m.\xc3\xa9t\xc3\xa9 \"quoted\" \\ back", StDType::F32, {2});
      add(std::string("tab\there"), StDType::U8, {1});
      metadata = {{"note", "line1\nline2\t\"q\" \xe2\x82\xac"}, {"", "empty key"}, {"empty value", ""}};
      break;
    case 3:  // odd sizes, so that nothing happens to be aligned
      add("a", StDType::U8, {1});
      add("b", StDType::I16, {3});
      add("c", StDType::U8, {5});
      add("d", StDType::F64, {1});
      break;
  }
  return t;
}

// The small file the truncation and bit-flip tests take apart: two tensors and metadata.
std::vector<std::byte> small_file() {
  static const std::vector<std::byte> a = pattern(8, 1), b = pattern(3, 2);
  SafetensorsWriter w;
  w.add("x", StDType::F32, {2}, a);
  w.add("yy", StDType::U8, {3}, b);
  w.set_metadata({{"step", "7"}});
  return w.serialize();
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // ---- SHA-256 ----

  void sha256KnownAnswers_data() {
    QTest::addColumn<QByteArray>("message");
    QTest::addColumn<QString>("digest");
    // The first four are FIPS 180-2 appendix B / NIST examples; the 'a' runs (digests from coreutils
    // sha256sum) straddle the padding boundaries: 55 bytes is the longest message whose length still fits in
    // its last block, 56 the shortest that needs another block.
    QTest::newRow("empty") << QByteArray()
                           << "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    QTest::newRow("abc") << QByteArray("abc")
                         << "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    QTest::newRow("448 bits") << QByteArray("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                              << "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
    QTest::newRow("896 bits")
        << QByteArray(
               "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnop"
               "qklmnopqrlmnopqrsmnopqrstnopqrstu")
        << "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1";
    QTest::newRow("55 a") << QByteArray(55, 'a')
                          << "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318";
    QTest::newRow("56 a") << QByteArray(56, 'a')
                          << "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a";
    QTest::newRow("64 a") << QByteArray(64, 'a')
                          << "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb";
    QTest::newRow("119 a") << QByteArray(119, 'a')
                           << "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb";
  }

  void sha256KnownAnswers() {
    QFETCH(QByteArray, message);
    QFETCH(QString, digest);
    QCOMPARE(QString::fromStdString(sha256_hex(qbytes_of(message))), digest);
    Sha256 incremental;  // byte by byte
    for (const char c : message) incremental.update(std::string_view(&c, 1));
    QCOMPARE(QString::fromStdString(to_hex(incremental.finish())), digest);
  }

  void sha256MillionA() {
    const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    const std::string million(1000000, 'a');
    QCOMPARE(sha256_hex(bytes_of(million)), expected);
    Sha256 h;
    for (int i = 0; i < 1000; ++i) h.update(std::string_view(million.data(), 1000));
    QCOMPARE(to_hex(h.finish()), expected);
  }

  void sha256SplitAtEveryOffset() {
    std::vector<std::byte> message(200);
    for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<std::byte>((i * 7 + 3) % 256);
    const std::string expected =
        "2c7e18c942ef065b526a2d4e5546283749cd3ddfb51d8fc71f42717363685f46";  // hashlib
    QCOMPARE(sha256_hex(message), expected);
    const std::span<const std::byte> all(message);
    Sha256 h;
    for (std::size_t split = 0; split <= message.size(); ++split) {
      h.update(all.first(split));
      h.update(all.subspan(split));
      QCOMPARE(to_hex(h.finish()), expected);  // finish() also resets, which the next iteration relies on
    }
    for (std::size_t a = 0; a <= message.size(); a += 13) {
      for (std::size_t b = a; b <= message.size(); b += 29) {
        h.update(all.first(a));
        h.update(all.subspan(a, b - a));
        h.update(all.subspan(b));
        QCOMPARE(to_hex(h.finish()), expected);
      }
    }
  }

  // The hash owns an OpenSSL context: it moves, with its state, and is never copied.
  void sha256MovesItsState() {
    static_assert(!std::is_copy_constructible_v<Sha256> && !std::is_copy_assignable_v<Sha256>);
    static_assert(std::is_nothrow_move_constructible_v<Sha256> && std::is_nothrow_move_assignable_v<Sha256>);
    Sha256 first;
    first.update(std::string_view("ab"));
    Sha256 moved(std::move(first));
    moved.update(std::string_view("c"));
    QCOMPARE(to_hex(moved.finish()),
             std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    Sha256 assigned;
    assigned.update(std::string_view("discarded"));
    assigned = std::move(moved);  // reset by finish(): hashes a new message
    assigned.update(std::string_view("abc"));
    QCOMPARE(to_hex(assigned.finish()),
             std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  }

  // ---- dtypes ----

  void dtypeNamesAndSizes() {
    const std::vector<std::tuple<StDType, std::string_view, std::size_t>> expected = {
        {StDType::BOOL, "BOOL", 1},       {StDType::U8, "U8", 1},           {StDType::I8, "I8", 1},
        {StDType::F8_E5M2, "F8_E5M2", 1}, {StDType::F8_E4M3, "F8_E4M3", 1}, {StDType::F8_E8M0, "F8_E8M0", 1},
        {StDType::I16, "I16", 2},         {StDType::U16, "U16", 2},         {StDType::F16, "F16", 2},
        {StDType::BF16, "BF16", 2},       {StDType::I32, "I32", 4},         {StDType::U32, "U32", 4},
        {StDType::F32, "F32", 4},         {StDType::F64, "F64", 8},         {StDType::I64, "I64", 8},
        {StDType::U64, "U64", 8},
    };
    for (const auto& [dtype, name, size] : expected) {
      QCOMPARE(to_string(dtype), name);
      QCOMPARE(st_dtype_size(dtype), size);
      QVERIFY(st_dtype_from_string(name) == dtype);
    }
    for (const char* unknown : {"f32", "F4", "F6_E2M3", "C64", "", "F32 "}) {
      QVERIFY2(!st_dtype_from_string(unknown), unknown);
    }
  }

  // ---- the reader against the format, not only against our writer ----

  void readsHandWrittenFile() {
    // 194 bytes of JSON and 3 spaces of padding: 197 = 0xc5, deliberately not a multiple of 8.
    const std::string_view json =
        R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("s":{"dtype":"I16","shape":[],"data_offsets":[8,10]},)"
        R"("e":{"dtype":"U8","shape":[0,3],"data_offsets":[10,10]}})"
        "   ";
    QCOMPARE(json.size(), std::size_t{197});
    std::vector<std::byte> file = {std::byte{0xc5}, std::byte{0}, std::byte{0}, std::byte{0},
                                   std::byte{0},    std::byte{0}, std::byte{0}, std::byte{0}};
    append(file, bytes_of(json));
    // w = [1.0f, -2.0f], s = int16 -2, all little-endian
    for (const int b : {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0xfe, 0xff})
      file.push_back(std::byte(b));

    const SafetensorsFile st = SafetensorsFile::parse(file, "hand.safetensors");
    QCOMPARE(st.header_size(), std::uint64_t{197});
    QCOMPARE(st.data_section().size(), std::size_t{10});
    QCOMPARE(st.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    const std::vector<StTensorInfo> expected = {
        {"w", StDType::F32, {2}, 0, 8}, {"s", StDType::I16, {}, 8, 10}, {"e", StDType::U8, {0, 3}, 10, 10}};
    QVERIFY(st.tensors() == expected);  // header order

    float w[2];
    QCOMPARE(st.data(*st.find("w")).size(), sizeof w);
    std::memcpy(w, st.data(*st.find("w")).data(), sizeof w);
    QCOMPARE(w[0], 1.0f);
    QCOMPARE(w[1], -2.0f);
    std::int16_t s = 0;
    QCOMPARE(st.data(*st.find("s")).size(), sizeof s);
    std::memcpy(&s, st.data(*st.find("s")).data(), sizeof s);
    QCOMPARE(s, std::int16_t{-2});
    QCOMPARE(st.data(*st.find("e")).size(), std::size_t{0});
    QVERIFY(st.find("missing") == nullptr);
    QVERIFY(st.find("__metadata__") == nullptr);

    // An info that is not from this file is refused, not read out of bounds.
    try {
      (void)st.data(StTensorInfo{"w", StDType::F32, {4}, 0, 16});
      QFAIL("an out-of-range info was accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
    }
  }

  void acceptsValidEdgeCases_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<int>("dataBytes");
    QTest::addColumn<QStringList>("names");  // header order
    QTest::newRow("no tensors") << QByteArray("{}") << 0 << QStringList{};
    QTest::newRow("only metadata") << QByteArray(R"({"__metadata__":{}})") << 0 << QStringList{};
    QTest::newRow("JSON whitespace, fields reordered")
        << QByteArray(
               "{ \"a\" :\n\t{ \"data_offsets\" : [ 0 , 4 ], \"shape\":[1], \"dtype\":\"F32\" } }\r\n  ")
        << 4 << QStringList{"a"};
    QTest::newRow("escaped name") << QByteArray(
                                         R"({"\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})")
                                  << 1 << QStringList{QString::fromUtf8("\xc3\xa9\n")};
    QTest::newRow("listed out of offset order")
        << QByteArray(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                      R"("a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})")
        << 8 << QStringList{"b", "a"};
    QTest::newRow("empty tensors between others")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                      R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                      R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                      R"("y":{"dtype":"F32","shape":[3,0],"data_offsets":[8,8]}})")
        << 8 << QStringList{"a", "z", "b", "y"};
    // The product of the dimensions is 0, so there is nothing to overflow.
    QTest::newRow("huge dimensions times zero")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,0],)"
                      R"("data_offsets":[0,0]}})")
        << 0 << QStringList{"a"};
  }

  void acceptsValidEdgeCases() {
    QFETCH(QByteArray, header);
    QFETCH(int, dataBytes);
    QFETCH(QStringList, names);
    const Outcome out =
        try_parse(file_with_header(header.toStdString(), static_cast<std::size_t>(dataBytes)));
    QVERIFY2(out.accepted, out.message.c_str());
    QStringList got;
    for (const auto& t : out.file->tensors()) got << QString::fromStdString(t.name);
    QCOMPARE(got, names);
    QCOMPARE(out.file->data_section().size(), static_cast<std::size_t>(dataBytes));
  }

  // ---- writer ----

  void writerProducesExactBytes() {
    const std::vector<std::byte> data = {std::byte{1}, std::byte{2}};
    SafetensorsWriter w;
    w.add("x", StDType::U8, {2}, data);
    w.set_metadata({{"k", "v"}});
    // 78 bytes of JSON + 2 spaces = 80 = 0x50: the data section starts at 88, a multiple of 8.
    std::vector<std::byte> expected = le64(0x50);
    append(expected,
           bytes_of(R"({"__metadata__":{"k":"v"},"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})"
                    "  "));
    append(expected, data);
    QCOMPARE(expected.size(), std::size_t{8 + 80 + 2});
    QVERIFY(w.serialize() == expected);
    QCOMPARE(w.header_bytes().size(), std::size_t{88});
    QCOMPARE(w.data_section_size(), std::uint64_t{2});
    QCOMPARE(w.data_section_sha256_hex(), sha256_hex(data));

    SafetensorsWriter empty;  // "{}" padded to 8
    std::vector<std::byte> expected_empty = le64(8);
    append(expected_empty, bytes_of("{}      "));
    QVERIFY(empty.serialize() == expected_empty);
  }

  void writerRefusesBadTensors_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("dtype");
    QTest::addColumn<QList<qint64>>("shape");
    QTest::addColumn<int>("dataBytes");
    QTest::addColumn<QString>("expected");
    const int f32 = static_cast<int>(StDType::F32);
    QTest::newRow("size mismatch") << "a" << f32 << QList<qint64>{3} << 8 << "needs 12 bytes, got 8";
    QTest::newRow("duplicate") << "dup" << f32 << QList<qint64>{1} << 4 << "already added";
    QTest::newRow("reserved") << "__metadata__" << f32 << QList<qint64>{1} << 4 << "reserved";
    QTest::newRow("empty name") << "" << f32 << QList<qint64>{1} << 4 << "empty name";
    QTest::newRow("negative") << "n" << f32 << QList<qint64>{-1, -4} << 4 << "negative dimension";
    QTest::newRow("overflow") << "o" << f32 << QList<qint64>{qint64{1} << 62} << 4 << "too large";
  }

  void writerRefusesBadTensors() {
    QFETCH(QString, name);
    QFETCH(int, dtype);
    QFETCH(QList<qint64>, shape);
    QFETCH(int, dataBytes);
    QFETCH(QString, expected);
    const std::vector<std::byte> data(static_cast<std::size_t>(dataBytes));
    const std::vector<std::byte> four(4);
    SafetensorsWriter w;
    w.add("dup", StDType::F32, {1}, four);
    try {
      w.add(name.toStdString(), static_cast<StDType>(dtype),
            std::vector<std::int64_t>(shape.begin(), shape.end()), data);
      QFAIL("accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
      QVERIFY2(contains(e.what(), expected.toStdString()), e.what());
    }
    QCOMPARE(w.tensors().size(), std::size_t{1});  // nothing half-added
    QCOMPARE(w.data_section_size(), std::uint64_t{4});
  }

  void writerRefusesInvalidUtf8() {
    SafetensorsWriter w;
    const std::vector<std::byte> one(1);
    QVERIFY_THROWS_EXCEPTION(Error, w.add("bad\xff", StDType::U8, {1}, one));
    QVERIFY_THROWS_EXCEPTION(Error, w.set_metadata({{"k", "\xc0\xaf"}}));
  }

  // ---- round trips ----

  void roundTrip_data() {
    QTest::addColumn<int>("id");
    QTest::newRow("every engine dtype, scalar, empty") << 0;
    QTest::newRow("no tensors, no metadata") << 1;
    QTest::newRow("names and metadata that need escaping") << 2;
    QTest::newRow("odd sizes") << 3;
  }

  void roundTrip() {
    QFETCH(int, id);
    std::map<std::string, std::string> metadata;
    const std::vector<TensorCase> cases = round_trip_case(id, metadata);
    SafetensorsWriter w;
    for (const auto& c : cases) w.add(c.name, c.dtype, c.shape, c.data);
    w.set_metadata(metadata);

    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path path = fs::path(dir.path().toStdString()) / "model.safetensors";
    w.write(path);
    QCOMPARE(folder_listing(path.parent_path()), std::vector<std::string>{"model.safetensors"});
    const std::vector<std::byte> on_disk = test::read_all(path);
    QVERIFY(on_disk == w.serialize());

    const SafetensorsFile st = SafetensorsFile::read(path);
    QCOMPARE(st.source_name(), path.string());
    QCOMPARE(st.metadata(), metadata);
    QCOMPARE(st.tensors().size(), cases.size());
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const StTensorInfo& t = st.tensors()[i];
      QCOMPARE(t.name, cases[i].name);  // insertion order, contiguous from 0
      QVERIFY(t.dtype == cases[i].dtype);
      QCOMPARE(t.shape, cases[i].shape);
      QCOMPARE(t.begin, offset);
      offset += cases[i].data.size();
      QCOMPARE(t.end, offset);
      const auto d = st.data(t);
      QVERIFY(std::equal(d.begin(), d.end(), cases[i].data.begin(), cases[i].data.end()));
      QCOMPARE(st.find(t.name), &t);
    }
    QCOMPARE(st.data_section().size(), offset);
    QCOMPARE(sha256_hex(st.data_section()), w.data_section_sha256_hex());

    // The padding: the data section starts at a multiple of 8, and the JSON is followed only by spaces.
    QCOMPARE((8 + st.header_size()) % 8, std::uint64_t{0});
    const std::string header(reinterpret_cast<const char*>(on_disk.data()) + 8, st.header_size());
    const std::size_t close = header.find_last_of('}');
    QVERIFY(close != std::string::npos && header.size() - close - 1 < 8);
    QVERIFY(std::all_of(header.begin() + static_cast<std::ptrdiff_t>(close) + 1, header.end(),
                        [](char c) { return c == ' '; }));
  }

  // ---- hostile input ----

  void everyTruncationIsRefused() {
    const std::vector<std::byte> full = small_file();
    const std::uint64_t header = SafetensorsFile::parse(full, "full").header_size();
    QCOMPARE(full.size(), 8 + header + 11);
    for (std::size_t n = 0; n < full.size(); ++n) {
      const Outcome out = try_parse({full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)});
      QVERIFY2(!out.accepted, qPrintable(QString("a prefix of %1 bytes was accepted").arg(n)));
      QCOMPARE(out.kind, ErrorKind::io);
      // Which check refuses it follows from where the cut falls.
      const char* expected = n < 8            ? "too short"
                             : n < 8 + header ? "runs past the end of the file"
                                              : "out of bounds";
      QVERIFY2(contains(out.message, expected), out.message.c_str());
    }
  }

  void headerBitFlipsAreRefusedOrGiveOtherValidContent() {
    const std::vector<std::byte> full = small_file();
    const SafetensorsFile original = SafetensorsFile::parse(full, "full");
    const std::size_t header_end = 8 + original.header_size();
    int refused = 0, accepted = 0;
    for (std::size_t bit = 0; bit < 8 * header_end; ++bit) {
      std::vector<std::byte> flipped = full;
      flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      const Outcome out = try_parse(std::move(flipped));
      if (!out.accepted) {
        QCOMPARE(out.kind, ErrorKind::io);
        QVERIFY(contains(out.message, "hostile.safetensors: "));
        ++refused;
        continue;
      }
      ++accepted;
      const SafetensorsFile& st = *out.file;
      QVERIFY2(st.tensors() != original.tensors() || st.metadata() != original.metadata(),
               qPrintable(QString("flipping bit %1 changed nothing the reader reports").arg(bit)));
      // Whatever it parsed to is self-consistent.
      std::uint64_t covered = 0;
      for (const auto& t : st.tensors()) {
        std::uint64_t n = st_dtype_size(t.dtype);
        for (const auto d : t.shape) n *= static_cast<std::uint64_t>(d);
        QCOMPARE(t.end - t.begin, n);
        QVERIFY(t.end <= st.data_section().size());
        covered += n;
      }
      QCOMPARE(covered, st.data_section().size());
    }
    QCOMPARE(refused + accepted, static_cast<int>(8 * header_end));
    // Flipping the case bit of the name "x" gives "X": still a valid file, with a different name.
    std::vector<std::byte> renamed = full;
    const std::string header(reinterpret_cast<const char*>(full.data()), header_end);
    const std::size_t at = header.find("\"x\"");
    QVERIFY(at != std::string::npos);
    renamed[at + 1] ^= std::byte{0x20};
    const Outcome out = try_parse(renamed);
    QVERIFY2(out.accepted, out.message.c_str());
    QCOMPARE(out.file->tensors()[0].name, std::string("X"));
    QVERIFY(accepted > 0 && refused > 0);
  }

  // The format layer does not checksum tensor data (the checkpoint's sha256 metadata, a layer above, does): a
  // flipped bit in the data section is a valid file with the same header and one different byte.
  void dataBitFlipsAreAcceptedByTheFormatLayer() {
    const std::vector<std::byte> full = small_file();
    const SafetensorsFile original = SafetensorsFile::parse(full, "full");
    const std::size_t data_start = 8 + original.header_size();
    for (std::size_t bit = 8 * data_start; bit < 8 * full.size(); ++bit) {
      std::vector<std::byte> flipped = full;
      flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      const Outcome out = try_parse(std::move(flipped));
      QVERIFY2(out.accepted, out.message.c_str());
      QVERIFY(out.file->tensors() == original.tensors());
      QCOMPARE(out.file->metadata(), original.metadata());
      const auto a = original.data_section(), b = out.file->data_section();
      std::size_t differing = 0;
      for (std::size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
      QCOMPARE(differing, std::size_t{1});
      QVERIFY(a[bit / 8 - data_start] != b[bit / 8 - data_start]);
    }
  }

  void refusesBadLengthField_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<QString>("expected");
    const auto raw = [](std::uint64_t length, QByteArray rest) {
      QByteArray out;
      for (int i = 0; i < 8; ++i) out.append(static_cast<char>((length >> (8 * i)) & 0xff));
      return out + rest;
    };
    QTest::newRow("empty file") << QByteArray() << "file is too short to be safetensors (0 bytes";
    QTest::newRow("7 bytes") << QByteArray(7, '\0') << "file is too short to be safetensors (7 bytes";
    QTest::newRow("length 0") << raw(0, "{}") << "header length is 0";
    QTest::newRow("length 2^63") << raw(std::uint64_t{1} << 63, "{}")
                                 << "header length 9223372036854775808 exceeds the limit of 104857600 bytes";
    QTest::newRow("length 2^64-1") << raw(~std::uint64_t{0}, "{}")
                                   << "header length 18446744073709551615 exceeds";
    QTest::newRow("length past the file")
        << raw(100, "{}") << "header length 100 runs past the end of the file (2 bytes follow";
    QTest::newRow("length one past the file")
        << raw(3, "{}") << "header length 3 runs past the end of the file";
  }

  void refusesBadLengthField() {
    QFETCH(QByteArray, file);
    QFETCH(QString, expected);
    const Outcome out = try_parse(qbytes_of(file));
    QVERIFY(!out.accepted);
    QCOMPARE(out.kind, ErrorKind::io);
    QVERIFY2(contains(out.message, "hostile.safetensors: " + expected.toStdString()), out.message.c_str());
  }

  void headerLimitIsConfigurable() {
    const std::vector<std::byte> file = small_file();  // a header of 64 bytes or more
    const Outcome out = try_parse(file, ReadLimits{16});
    QVERIFY(!out.accepted);
    QVERIFY2(contains(out.message, "exceeds the limit of 16 bytes"), out.message.c_str());
  }

  void refusesHostileHeaders_data() {
    QTest::addColumn<QByteArray>("header");
    QTest::addColumn<int>("dataBytes");
    QTest::addColumn<QString>("expected");
    const auto u8 = [](const QByteArray& name, int begin, int end) {
      return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + QByteArray::number(end - begin) +
             "],\"data_offsets\":[" + QByteArray::number(begin) + "," + QByteArray::number(end) + "]}";
    };
    // Layout of the data section
    QTest::newRow("overlapping offsets") << "{" + u8("a", 0, 8) + "," + u8("b", 4, 12) + "}" << 12
                                         << "tensors 'a' [0, 8] and 'b' [4, 12] overlap";
    QTest::newRow("same range twice") << "{" + u8("a", 0, 4) + "," + u8("b", 0, 4) + "}" << 4
                                      << "tensors 'a' [0, 4] and 'b' [0, 4] overlap";
    QTest::newRow("empty tensor inside another") << "{" + u8("a", 0, 4) + "," + u8("z", 2, 2) + "}" << 4
                                                 << "tensors 'a' [0, 4] and 'z' [2, 2] overlap";
    QTest::newRow("offsets out of range")
        << "{" + u8("a", 0, 8) + "}" << 4
        << "tensor 'a': data_offsets [0, 8] are out of bounds: the data section "
           "holds 4 bytes";
    QTest::newRow("offsets far out of range")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[0],)"
                      R"("data_offsets":[9223372036854775808,9223372036854775808]}})")
        << 0 << "tensor 'a': data_offsets [9223372036854775808, 9223372036854775808] are out of bounds";
    QTest::newRow("gap between tensors") << "{" + u8("a", 0, 4) + "," + u8("b", 8, 12) + "}" << 12
                                         << "gap of 4 bytes in the data section before tensor 'b' [8, 12]";
    QTest::newRow("gap at the start")
        << "{" + u8("a", 3, 8) + "}" << 8 << "gap of 3 bytes in the data section before tensor 'a' [3, 8]";
    QTest::newRow("trailing bytes")
        << "{" + u8("a", 0, 4) + "}" << 8
        << "4 trailing bytes after the last tensor (the data section holds 8 bytes, "
           "the tensors cover 4)";
    QTest::newRow("data but no tensors") << QByteArray("{}") << 3 << "3 trailing bytes after the last tensor";
    // Sizes
    QTest::newRow("shape overflow [2^62, 2^62] F32")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],)"
                      R"("data_offsets":[0,0]}})")
        << 0 << "tensor 'a': shape [4611686018427387904, 4611686018427387904] of F32 overflows";
    QTest::newRow("byte size overflow [2^62] F32")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})") << 0
        << "tensor 'a': shape [4611686018427387904] of F32 overflows";
    QTest::newRow("size mismatch")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})") << 8
        << "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets [0, 8] hold 8";
    QTest::newRow("negative dimension")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})") << 8
        << "tensor 'a': shape has a negative dimension -1";
    QTest::newRow("dimension past int64")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})") << 0
        << "tensor 'a': dimension 9223372036854775808 is too large";
    QTest::newRow("fractional dimension")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}})") << 2
        << "tensor 'a': shape must be an array of non-negative integers";
    QTest::newRow("dimension as a string")
        << QByteArray(R"({"a":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})") << 2
        << "tensor 'a': shape must be an array of non-negative integers, got a string";
    QTest::newRow("nested shape")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[[2]],"data_offsets":[0,2]}})") << 2
        << "tensor 'a': shape must be an array of non-negative integers, got an array";
    QTest::newRow("shape not an array")
        << QByteArray(R"({"a":{"dtype":"U8","shape":2,"data_offsets":[0,2]}})") << 2
        << "tensor 'a': shape is not an array, got a number";
    // Offsets
    QTest::newRow("begin after end") << QByteArray(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})")
                                     << 8 << "tensor 'a': data_offsets begin 8 is greater than end 4";
    QTest::newRow("three offsets") << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4,8]}})")
                                   << 8 << "tensor 'a': data_offsets must be exactly two integers";
    QTest::newRow("one offset") << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4]}})") << 4
                                << "tensor 'a': data_offsets must be exactly two integers";
    QTest::newRow("negative offset") << QByteArray(
                                            R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[-1,3]}})")
                                     << 4 << "tensor 'a': data_offsets must be non-negative, got -1";
    QTest::newRow("fractional offset")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4.0]}})") << 4
        << "tensor 'a': data_offsets must be two non-negative integers [begin, end], got a fraction";
    QTest::newRow("offset past uint64")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,1e30]}})") << 4
        << "tensor 'a': data_offsets must be two non-negative integers [begin, end], got a fraction or an "
           "out-of-range number";
    QTest::newRow("offsets not an array")
        << QByteArray(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":"0-4"}})") << 4
        << "tensor 'a': data_offsets is not an array, got a string";
    // Entries and fields
    QTest::newRow("unknown dtype") << QByteArray(R"({"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})")
                                   << 4 << "tensor 'a': unknown dtype 'F99'";
    QTest::newRow("lower-case dtype")
        << QByteArray(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})") << 4
        << "tensor 'a': unknown dtype 'f32'";
    QTest::newRow("sub-byte dtype") << QByteArray(R"({"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})")
                                    << 1 << "tensor 'a': unknown dtype 'F4'";
    QTest::newRow("dtype not a string") << QByteArray(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})")
                                        << 4 << "tensor 'a': dtype is not a string, got a number";
    QTest::newRow("missing data_offsets") << QByteArray(R"({"a":{"dtype":"U8","shape":[1]}})") << 1
                                          << "tensor 'a': missing field 'data_offsets'";
    QTest::newRow("missing dtype") << QByteArray(R"({"a":{"shape":[1],"data_offsets":[0,1]}})") << 1
                                   << "tensor 'a': missing field 'dtype'";
    QTest::newRow("extra field") << QByteArray(
                                        R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":1}})")
                                 << 1 << "tensor 'a': unknown field 'foo'";
    QTest::newRow("duplicate field")
        << QByteArray(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})") << 1
        << "tensor 'a': duplicate field 'dtype'";
    QTest::newRow("entry not an object")
        << QByteArray(R"({"a":[1]})") << 0 << "tensor 'a': entry is not an object, got an array";
    QTest::newRow("entry is null") << QByteArray(R"({"a":null})") << 0
                                   << "tensor 'a': entry is not an object, got null";
    QTest::newRow("deep nesting") << "{\"a\":" + QByteArray(100000, '[') + QByteArray(100000, ']') + "}" << 0
                                  << "tensor 'a': entry is not an object, got an array";
    // Names
    QTest::newRow("duplicate names") << "{" + u8("a", 0, 4) + "," + u8("a", 4, 8) + "}" << 8
                                     << "duplicate tensor name 'a'";
    QTest::newRow("empty name") << "{" + u8("", 0, 4) + "}" << 4 << "a tensor has an empty name";
    QTest::newRow("tensor named __metadata__")
        << QByteArray(R"({"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") << 4
        << "a tensor may not be named '__metadata__'";
    QTest::newRow("control character in a name is escaped")
        << "{" + u8("a\\u0001", 0, 4) + "," + u8("a\\u0001", 4, 8) + "}" << 8
        << "duplicate tensor name 'a\\x01'";
    QTest::newRow("long name is cut in messages")
        << "{" + u8(QByteArray(1000, 'n'), 0, 4) + "," + u8(QByteArray(1000, 'n'), 4, 8) + "}" << 8
        << "duplicate tensor name '" + QString(64, 'n') + "'...";
    // Metadata
    QTest::newRow("non-string metadata") << QByteArray(R"({"__metadata__":{"step":7}})") << 0
                                         << "__metadata__ value of 'step' is not a string, got a number";
    QTest::newRow("nested metadata") << QByteArray(R"({"__metadata__":{"cfg":{"a":"b"}}})") << 0
                                     << "__metadata__ value of 'cfg' is not a string, got an object";
    QTest::newRow("metadata not an object")
        << QByteArray(R"({"__metadata__":"v1"})") << 0 << "__metadata__ is not an object, got a string";
    QTest::newRow("metadata an array")
        << QByteArray(R"({"__metadata__":[]})") << 0 << "__metadata__ is not an object, got an array";
    QTest::newRow("metadata twice") << QByteArray(R"({"__metadata__":{},"__metadata__":{}})") << 0
                                    << "__metadata__ appears twice";
    QTest::newRow("duplicate metadata key")
        << QByteArray(R"({"__metadata__":{"k":"1","k":"2"}})") << 0 << "__metadata__ has a duplicate key 'k'";
    // Encoding and syntax
    QTest::newRow("invalid UTF-8") << QByteArray("{\"\xff\":{}}") << 0
                                   << "header is not valid UTF-8 (byte 2 of the header)";
    QTest::newRow("overlong UTF-8") << QByteArray("{\"\xc0\xaf\":{}}") << 0 << "header is not valid UTF-8";
    QTest::newRow("UTF-8 surrogate") << QByteArray("{\"\xed\xa0\x80\":{}}") << 0
                                     << "header is not valid UTF-8";
    QTest::newRow("truncated UTF-8") << QByteArray("{\"a\":{}}\xe2\x82") << 0
                                     << "header is not valid UTF-8 (byte 8";
    QTest::newRow("unterminated JSON") << QByteArray(R"({"a":)") << 0 << "header is not valid JSON (at byte";
    QTest::newRow("garbage after the object") << QByteArray("{}x") << 0 << "header is not valid JSON";
    QTest::newRow("two objects") << QByteArray("{}{}") << 0 << "header is not valid JSON";
    QTest::newRow("NUL padding") << QByteArray("{}\0\0", 4) << 0
                                 << "header contains a NUL byte (byte 2 of the header)";
    QTest::newRow("text hidden after a NUL")
        << QByteArray("{}\0{\"a\":1}", 10) << 0 << "header contains a NUL byte";
    QTest::newRow("comment") << QByteArray("{/**/}") << 0 << "header is not valid JSON";
    QTest::newRow("array header") << QByteArray("[]") << 0
                                  << "header is not a JSON object (it must start with '{')";
    QTest::newRow("leading space") << QByteArray(" {}") << 0 << "header is not a JSON object";
    QTest::newRow("string header") << QByteArray("\"{}\"") << 0 << "header is not a JSON object";
  }

  void refusesHostileHeaders() {
    QFETCH(QByteArray, header);
    QFETCH(int, dataBytes);
    QFETCH(QString, expected);
    const Outcome out = try_parse(file_with_header(std::string_view(header.data(), header.size()),
                                                   static_cast<std::size_t>(dataBytes)));
    QVERIFY2(!out.accepted, "a hostile header was accepted");
    QCOMPARE(out.kind, ErrorKind::io);
    QVERIFY2(contains(out.message, "hostile.safetensors: " + expected.toStdString()), out.message.c_str());
  }

  void readRefusesWhatIsNotAFile() {
    QTemporaryDir dir;
    const fs::path missing = fs::path(dir.path().toStdString()) / "missing.safetensors";
    try {
      (void)SafetensorsFile::read(missing);
      QFAIL("read a missing file");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::io);
      QVERIFY2(contains(e.what(), missing.string() + ": cannot open: No such file or directory"), e.what());
    }
    try {
      (void)SafetensorsFile::read(dir.path().toStdString());
      QFAIL("read a folder");
    } catch (const Error& e) {
      QVERIFY2(contains(e.what(), "not a regular file"), e.what());
    }
    // A refusal from a real file names the file.
    const fs::path bad = fs::path(dir.path().toStdString()) / "bad.safetensors";
    write_plain(bad, "abc");
    try {
      (void)SafetensorsFile::read(bad);
      QFAIL("read a 3-byte file");
    } catch (const Error& e) {
      QVERIFY2(contains(e.what(), bad.string() + ": file is too short"), e.what());
    }
  }

  // ---- atomic writes ----

  void atomicWriteReplacesWhole() {
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    const fs::path target = folder / "target.bin";
    write_plain(target, std::string(10000, 'A'));
    write_file_atomically(target, bytes_of("new"));
    QVERIFY(test::read_all(target) == bytes_of("new"));
    write_file_atomically(target, [](const ByteSink& sink) {
      sink(bytes_of("one,"));
      sink({});
      sink(bytes_of("two"));
    });
    QVERIFY(test::read_all(target) == bytes_of("one,two"));
    write_file_atomically(folder / "fresh.bin", bytes_of(""));  // a new, empty file
    QCOMPARE(fs::file_size(folder / "fresh.bin"), std::uintmax_t{0});
    QCOMPARE(folder_listing(folder), (std::vector<std::string>{"fresh.bin", "target.bin"}));
  }

  void atomicWriteGoesThroughAHiddenTempFile() {
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    const fs::path target = folder / "target.bin";
    write_plain(target, "old");
    const mode_t old_mask = ::umask(022);
    std::string temp_name;
    bool old_still_there = false;
    mode_t temp_mode = 0;
    write_file_atomically(target, [&](const ByteSink& sink) {
      sink(bytes_of("new content"));
      // Mid-write: the target is untouched, and one temporary file sits beside it.
      old_still_there = test::read_all(target) == bytes_of("old");
      for (const auto& name : folder_listing(folder)) {
        if (name != "target.bin") temp_name = name;
      }
      struct stat st {};
      if (::stat((folder / temp_name).c_str(), &st) == 0) temp_mode = st.st_mode & 07777;
    });
    ::umask(old_mask);
    QVERIFY(old_still_there);
    QVERIFY2(temp_name.starts_with(".target.bin.tmp-"), temp_name.c_str());
    QVERIFY(is_atomic_temp_file_name(temp_name));
    QCOMPARE(temp_mode, mode_t{0644});
    QVERIFY(test::read_all(target) == bytes_of("new content"));
    QCOMPARE(folder_listing(folder), std::vector<std::string>{"target.bin"});
  }

  void atomicWriteFailureLeavesOldFile_data() {
    QTest::addColumn<QString>("failure");
    QTest::addColumn<QString>("reason");
    QTest::newRow("missing folder") << "missing folder"
                                    << "No such file or directory";
    QTest::newRow("target is a folder")
        << "target is a folder"
        << "a folder, not a regular file";  // refused before anything is written
    QTest::newRow("read-only folder") << "read-only folder"
                                      << "Permission denied";
    QTest::newRow("file size limit (EFBIG)") << "file size limit"
                                             << "File too large";
    QTest::newRow("full file system (ENOSPC)") << "full file system"
                                               << "No space left on device";
    QTest::newRow("producer throws") << "producer throws"
                                     << "producer gave up";
  }

  void atomicWriteFailureLeavesOldFile() {
    QFETCH(QString, failure);
    QFETCH(QString, reason);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    fs::path folder = dir.path().toStdString();
    const std::vector<std::byte> big(1 << 20, std::byte{'N'});
    std::vector<std::byte> payload = bytes_of("new");
    bool throwing_producer = false;
    struct Cleanup {
      std::function<void()> run;
      void now() {
        if (run) std::exchange(run, nullptr)();
      }
      ~Cleanup() { now(); }
    } cleanup;

    if (failure == "missing folder") {
      folder /= "no/such/folder";
    } else if (failure == "target is a folder") {
      fs::create_directory(folder / "target.bin");
    } else if (failure == "read-only folder") {
      if (::geteuid() == 0) QSKIP("running as root, which ignores folder permissions");
      write_plain(folder / "target.bin", "old");
      fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec);
      cleanup.run = [folder] { fs::permissions(folder, fs::perms::owner_all); };
    } else if (failure == "file size limit") {
      write_plain(folder / "target.bin", "old");
      payload = big;  // refused past the 4 KiB limit set below
    } else if (failure == "full file system") {
      folder /= "tiny";
      fs::create_directory(folder);
      if (::mount("tmpfs", folder.c_str(), "tmpfs", 0, "size=64k") != 0) {
        const std::string why = std::string("cannot mount a small tmpfs to fill: ") + std::strerror(errno);
        QSKIP(why.c_str());
      }
      cleanup.run = [folder] { ::umount2(folder.c_str(), MNT_DETACH); };
      write_plain(folder / "target.bin", "old");
      payload = big;
    } else if (failure == "producer throws") {
      write_plain(folder / "target.bin", "old");
      throwing_producer = true;
    }
    const fs::path target = folder / "target.bin";
    const bool had_old = fs::is_regular_file(target);
    const auto listing_before = fs::exists(folder) ? folder_listing(folder) : std::vector<std::string>{};

    std::string message;
    bool io_error = false;
    decltype(cleanup) restore_limit;
    if (failure == "file size limit") {
      // Writes past RLIMIT_FSIZE fail with EFBIG once SIGXFSZ is ignored; root is bound by it too.
      rlimit saved{};
      ::getrlimit(RLIMIT_FSIZE, &saved);
      std::signal(SIGXFSZ, SIG_IGN);
      rlimit tight = saved;
      tight.rlim_cur = 4096;
      QCOMPARE(::setrlimit(RLIMIT_FSIZE, &tight), 0);
      restore_limit.run = [saved] {
        ::setrlimit(RLIMIT_FSIZE, &saved);
        std::signal(SIGXFSZ, SIG_DFL);
      };
    }
    try {
      if (throwing_producer) {
        write_file_atomically(target, [](const ByteSink& sink) {
          sink(std::as_bytes(std::span("partial", 7)));
          throw std::runtime_error("producer gave up");
        });
      } else {
        write_file_atomically(target, payload);
      }
    } catch (const Error& e) {
      io_error = e.kind() == ErrorKind::io;
      message = e.what();
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    restore_limit.now();  // before anything else writes a file

    QVERIFY2(contains(message, reason.toStdString()), message.c_str());
    if (throwing_producer) {
      QVERIFY(!io_error);  // the producer's own exception, unchanged
    } else {
      QVERIFY(io_error);
      QVERIFY2(contains(message, target.string() + ": "), message.c_str());
    }
    if (had_old) QVERIFY(test::read_all(target) == bytes_of("old"));
    if (fs::exists(folder)) QCOMPARE(folder_listing(folder), listing_before);  // no temporary file left
  }

  void staleTempFilesAreRemoved() {
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    const std::vector<std::string> stale = {".model.safetensors.tmp-0123456789ab", ".x.tmp-abcdefabcdef"};
    const std::vector<std::string> kept = {
        "model.safetensors",                    // the real file
        ".model.safetensors.tmp-0123456789aB",  // not lower-case hex
        ".model.safetensors.tmp-0123456789a",   // 11 digits
        "model.safetensors.tmp-0123456789ab",   // no leading dot
        ".tmp-0123456789ab",                    // no target name
        ".x.tmp-0123456789abc",                 // 13 digits
        ".x.tmp_0123456789ab",
    };
    for (const auto& name : stale) write_plain(folder / name, "left by a crash");
    for (const auto& name : kept) write_plain(folder / name, "keep");
    fs::create_directory(folder / ".sub.tmp-0123456789ab");  // a folder, not a leftover file
    const std::vector<fs::path> removed = remove_stale_temp_files(folder);
    QCOMPARE(removed, (std::vector<fs::path>{folder / stale[0], folder / stale[1]}));
    std::vector<std::string> expected = kept;
    expected.push_back(".sub.tmp-0123456789ab");
    std::sort(expected.begin(), expected.end());
    QCOMPARE(folder_listing(folder), expected);
    QVERIFY(remove_stale_temp_files(folder).empty());
    QVERIFY_THROWS_EXCEPTION(Error, remove_stale_temp_files(folder / "missing"));
  }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
