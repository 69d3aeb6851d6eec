// Private to engine/unet/config: what the files of the key table share. The table is one list built in
// schema.cpp's build_schema(); its rows for the data.* keys are added by schema_data.cpp, the augment.* keys
// by schema_augment.cpp and the task and instances.* keys by schema_instances.cpp, each in the order the
// table (and so docs/CONFIG.md and the workbench's form) lists them. Nothing outside config/ includes it.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/config/config.h"

namespace unet::schema_rows {

using json = nlohmann::json;

// --- the schema --------------------------------------------------------------------------------------------

template <class Section, class T>
inline void bind(ConfigKey& k, Section Config::*section, T Section::*field) {
  k.get = [section, field](const Config& c) { return json((c.*section).*field); };
  k.set = [section, field](Config& c, const json& v) { (c.*section).*field = v.get<T>(); };
}

// A field of a struct inside a section (data.normalize's keys).
template <class Section, class Inner, class T>
inline void bind(ConfigKey& k, Section Config::*section, Inner Section::*inner, T Inner::*field) {
  k.get = [section, inner, field](const Config& c) { return json(((c.*section).*inner).*field); };
  k.set = [section, inner, field](Config& c, const json& v) { ((c.*section).*inner).*field = v.get<T>(); };
}

// An enumeration key: its choices, how it is written and how it is read all come from its one name table
// (config_enums.h). `field` returns the Config's member, for a const Config and a Config alike.
template <class E, std::size_t N, class Field>
inline void bind_names(ConfigKey& k, const EnumName<E> (&names)[N], Field field) {
  k.choices = names_of(names);
  k.get = [&names, field](const Config& c) { return json(name_in(names, field(c))); };
  k.set = [&names, field](Config& c, const json& v) {
    field(c) = *value_in(names, v.get_ref<const std::string&>());
  };
}

// Bounds on counts. Each is far above any run that makes sense on one machine, and low enough that products
// of them (batch x accumulation, samples x image bytes, epochs x steps per epoch) stay well inside int64, so
// that no user number can wrap into a small or negative count.
constexpr double kMaxBatch = 65536;            // train.batch_size, train.accumulation
constexpr double kMaxImageSide = 65536;        // data.image_size (data.max_image_side has the same bound)
constexpr double kMaxSamples = 16777216;       // data.synthetic_samples: 2^24
constexpr double kMaxEpochs = 1000000;         // train.epochs, checkpoint.every_epochs, checkpoint.keep_last
constexpr double kMaxSteps = 1000000000000.0;  // train.steps: 10^12

// Adds rows at the end of the table; each returned reference is used before the next row is added.
struct SchemaRows {
  std::vector<ConfigKey>& keys;

  ConfigKey& add(std::string path, ConfigType type, const char* group, const char* label, const char* help) {
    ConfigKey& k = keys.emplace_back();
    k.path = std::move(path);
    k.type = type;
    k.group = group;
    k.label = label;
    k.help = help;
    return k;
  }
  ConfigKey& integer(std::string path, const char* group, const char* label, const char* help,
                     std::optional<double> min, std::optional<double> max) {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  }
  ConfigKey& seed(std::string path, const char* group, const char* help) {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, "Seed", help);
    k.min = 0;
    k.unsigned64 = true;
    return k;
  }
};

// The rows of each part of the table, in the order build_schema() calls them.
void add_data_keys(SchemaRows& rows);      // schema_data.cpp
void add_augment_keys(SchemaRows& rows);   // schema_augment.cpp
void add_instance_keys(SchemaRows& rows);  // schema_instances.cpp: task, instances.*

}  // namespace unet::schema_rows
