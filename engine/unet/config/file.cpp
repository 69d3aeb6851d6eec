// Reading a config: a file (POSIX calls, so that a FIFO, a device or a huge file is refused before it is
// read), JSON text under the parse limits (duplicate keys and nesting refused, errors with line and column),
// and --set key=value overrides applied to the document before it is validated.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "unet/config/config.h"
#include "unet/config/schema_rules.h"
#include "unet/config/suggest.h"
#include "unet/core/json_limits.h"
#include "unet/core/unique_fd.h"

namespace unet {

using config_detail::as_json_string;
using config_detail::is_section;
using config_detail::leaf_of;
using config_detail::section_of;
using config_detail::show;
using config_detail::unknown_key_problem;

namespace {

using json = nlohmann::json;

// A config is a few KiB; the bound keeps a wrong path (a log, an image) from being read whole.
constexpr std::int64_t kMaxConfigFileBytes = std::int64_t{1} << 20;

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(" \t") - first + 1));
}

}  // namespace

nlohmann::json read_config_document(const std::filesystem::path& file) {
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the checks below refuse it, and devices such as
  // /dev/zero, before anything is read.
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) throw ConfigError(name, "the config file does not exist");
    throw ConfigError(name, std::string("cannot open the config file: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw ConfigError(name, std::string("cannot read the config file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw ConfigError(name, "is a folder, not a config file");
  if (!S_ISREG(st.st_mode))
    throw ConfigError(name, "is not a regular file (a pipe, device or socket); give the path of a JSON file");
  if (st.st_size > kMaxConfigFileBytes)
    throw ConfigError(name, "is " + std::to_string(st.st_size) + " bytes; a config file is at most " +
                                std::to_string(kMaxConfigFileBytes) + " bytes (1 MiB)");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(name, std::string("cannot read the config file: ") + std::strerror(errno));
    if (n == 0) break;  // it shrank meanwhile: parse what there is
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return parse_config_text(text, name);
}

nlohmann::json parse_config_text(std::string_view text, const std::string& source) {
  // Duplicate keys are refused while parsing (a DOM keeps one of them silently), naming the dotted key; the
  // key being read also names where a number too large for a double is. Each level keeps the key that
  // opened it and the keys seen in it; a dotted path is joined only for a message, so that neither time nor
  // memory grows with the depth times the keys (the depth itself is bounded by parse_json_bounded()).
  struct Level {
    std::string key;  // the key last read when this object opened (the top level's is not used)
    std::set<std::string, std::less<>> seen;
  };
  std::vector<Level> objects;
  std::string last_key;
  const auto dotted = [&](std::string_view leaf) {
    std::string path;
    for (std::size_t i = 1; i < objects.size(); ++i) path += objects[i].key + ".";
    return path + std::string(leaf);
  };
  const auto hook = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      objects.push_back({last_key, {}});
    } else if (event == json::parse_event_t::object_end) {
      if (!objects.empty()) objects.pop_back();
    } else if (event == json::parse_event_t::key && !objects.empty()) {
      last_key = parsed.get<std::string>();
      if (!objects.back().seen.insert(last_key).second)
        throw ConfigError(dotted(last_key),
                          "appears twice in the config file " + source + "; keep one of them");
    }
  };

  json j;
  try {
    j = parse_json_bounded(text, /*allow_exceptions=*/true, hook);
  } catch (const JsonTooDeep& e) {
    throw ConfigError(source, "has " + std::string(e.what()) + "; a config holds at most " +
                                  std::to_string(kMaxJsonDepth) + " levels (a real one has 2 or 3)");
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and may point one past the end; line and column count from 1.
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::size_t line = 1 + static_cast<std::size_t>(std::count(
                                     text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    const std::size_t line_start = at == 0 ? 0 : text.rfind('\n', at - 1) + 1;  // npos + 1 == 0
    const std::size_t column = at - line_start + 1;
    std::string reason = e.what();
    if (const auto p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    if (reason.starts_with("parse error"))
      if (const auto p = reason.find(": "); p != std::string::npos) reason = reason.substr(p + 2);
    throw ConfigError(source, "line " + std::to_string(line) + ", column " + std::to_string(column) +
                                  " (byte " + std::to_string(e.byte) + "): invalid JSON: " + reason);
  } catch (const json::exception& e) {
    // A number beyond double's range (1e400) is out_of_range.406, without a position.
    std::string reason = e.what();
    if (const auto p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    const std::string where =
        objects.empty() || last_key.empty() ? std::string() : " at key " + dotted(last_key);
    throw ConfigError(source, "invalid JSON" + where + ": " + reason +
                                  " (a number must fit a 64-bit float, up to about 1.8e308)");
  }
  return j;
}

Config load_config_file(const std::filesystem::path& file) {
  return config_from_json(read_config_document(file), std::filesystem::absolute(file).parent_path());
}

std::string override_key(std::string_view assignment) {
  return trim(assignment.substr(0, assignment.find('=')));
}

void apply_override(nlohmann::json& j, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos)
    throw ConfigError("--set", "expected key=value, got " + as_json_string(assignment));
  const std::string key = override_key(assignment);
  const std::string raw(assignment.substr(eq + 1));
  if (key.empty()) throw ConfigError("--set", "the key before '=' is empty in " + as_json_string(assignment));
  const ConfigKey* k = find_config_key(key);
  if (!k) {
    if (is_section(key))
      throw ConfigError(key, "is a section; set its keys one at a time, e.g. " + key + ".<key>=...");
    throw ConfigError(key, unknown_key_problem(key));
  }
  json value;
  try {
    value = parse_json_bounded(raw, /*allow_exceptions=*/false);
  } catch (const JsonTooDeep& e) {
    throw ConfigError(key, "the value has " + std::string(e.what()) + "; a config holds at most " +
                               std::to_string(kMaxJsonDepth) + " levels");
  }
  const bool textual =
      k->type == ConfigType::string || k->type == ConfigType::enumeration || k->type == ConfigType::path;
  if (value.is_discarded() || (textual && !value.is_string())) value = raw;
  if (!textual && value.is_string()) {
    // A number JSON cannot hold (1e400) is the user's number, not a string.
    errno = 0;
    char* end = nullptr;
    const std::string text = trim(raw);
    (void)std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && errno == ERANGE)
      throw ConfigError(key, "must fit a 64-bit float (up to about 1.8e308), got " + text);
  }
  if (auto problem = validate_value(*k, value)) {
    // The user's own text, not the JSON library's rendering of the number (1e22, not 1e+22).
    const std::string shown = ", got " + show(value);
    if (value.is_number_float() && problem->ends_with(shown))
      problem = problem->substr(0, problem->size() - shown.size()) + ", got " + trim(raw);
    throw ConfigError(key, *problem);
  }

  if (j.is_null()) j = json::object();
  if (!j.is_object()) throw ConfigError("", "a config must be a JSON object, got " + show(j));
  const std::string section(section_of(key));
  if (section.empty()) {
    j[key] = std::move(value);
    return;
  }
  json& s = j[section];
  if (s.is_null()) s = json::object();
  if (!s.is_object()) throw ConfigError(section, "must be an object, got " + show(s));
  s[std::string(leaf_of(key))] = std::move(value);
}

}  // namespace unet
