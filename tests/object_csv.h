// Reading back the object tables predict and the Predict window write (infer/instance_output.h, objects_csv):
// shared by the tests of the writer and of the CLI.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "unet/objects/instance_extraction.h"

namespace unet::test {

// The fields of `text` between `separator`s, empty fields kept ("a,," is three fields; "a\n" split at '\n'
// is "a" and "").
inline std::vector<std::string> split_fields(const std::string& text, char separator = ',') {
  std::vector<std::string> fields(1);
  for (const char ch : text) {
    if (ch == separator)
      fields.emplace_back();
    else
      fields.back() += ch;
  }
  return fields;
}

// One row's nine fields (id, area, centroid_y, centroid_x, y0, x0, y1, x1, mean_probability) parsed as
// written; an empty mean_probability is none.
inline ObjectDescription object_row(const std::vector<std::string>& f) {
  ObjectDescription o;
  o.id = static_cast<ObjectId>(std::stoull(f.at(0)));
  o.area = std::stoll(f.at(1));
  o.centroid_y = std::strtod(f.at(2).c_str(), nullptr);
  o.centroid_x = std::strtod(f.at(3).c_str(), nullptr);
  o.y0 = std::stoll(f.at(4));
  o.x0 = std::stoll(f.at(5));
  o.y1 = std::stoll(f.at(6));
  o.x1 = std::stoll(f.at(7));
  if (!f.at(8).empty()) o.mean_probability = std::strtod(f.at(8).c_str(), nullptr);
  return o;
}

}  // namespace unet::test
