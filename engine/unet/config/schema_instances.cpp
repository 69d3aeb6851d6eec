// The task row and the instances.* rows of the key table (Task, InstancesConfig): what the model learns,
// and for instance segmentation the target made from the labels and how output becomes objects again.
#include <string>

#include "unet/config/schema_rows.h"

namespace unet::schema_rows {

void add_instance_keys(SchemaRows& rows) {
  {
    ConfigKey& k = rows.add(
        "task", ConfigType::enumeration, "Task", "Task",
        "semantic: each pixel's class, masks as class indices; instances: objects told apart, even touching "
        "ones: masks are instance labels (a DSB 2018 folder's per-object masks, or label images whose every "
        "non-zero value is one object), the model learns instances.target, validation reports object "
        "metrics and predict writes label images.");
    bind_names(
        k, kTaskNames, [](auto& c) -> auto& { return c.task; });
  }
  const auto add = [&rows](std::string path, ConfigType type, const char* label,
                           const char* help) -> ConfigKey& {
    return rows.add(std::move(path), type, "Task", label, help);
  };
  using I = InstancesConfig;
  {
    ConfigKey& k =
        add("instances.target", ConfigType::enumeration, "Target",
            "task instances: boundary: three classes (0 background, 1 interior, 2 a boundary "
            "instances.boundary_width wide inside each object), model.classes 3; weight_map: the "
            "binary mask, with a one-pixel background ridge where two objects touch, and the U-Net paper's "
            "border weights on the cross-entropy, model.classes 1.");
    bind_names(
        k, kInstanceTargetNames, [](auto& c) -> auto& { return c.instances.target; });
  }
  {
    ConfigKey& k = add("instances.boundary_width", ConfigType::integer, "Boundary width (pixels)",
                       "boundary: an object's pixels closer than this to its edge (another object or the "
                       "background) are boundary; 1 is the edge alone.");
    k.min = 1;
    k.max = 64;
    bind(k, &Config::instances, &I::boundary_width);
  }
  {
    ConfigKey& k = add("instances.border_w0", ConfigType::number, "Border weight w0",
                       "weight_map: the weight added to background pixels between two objects, decaying with "
                       "their distances d1 + d2 (the U-Net paper: 10).");
    k.min = 0;
    k.max = 1000;
    bind(k, &Config::instances, &I::border_w0);
  }
  {
    ConfigKey& k = add("instances.border_sigma", ConfigType::number, "Border sigma (pixels)",
                       "weight_map: how fast the border weight decays, in pixels (the U-Net paper: 5).");
    k.min = 0;
    k.min_exclusive = true;
    k.max = 1024;
    bind(k, &Config::instances, &I::border_sigma);
  }
  bind(add("instances.balance_classes", ConfigType::boolean, "Balance classes",
           "weight_map: weigh background and foreground pixels so that each class weighs half of each image "
           "(the U-Net paper's w_c); false: 1."),
       &Config::instances, &I::balance_classes);
  {
    ConfigKey& k = add("instances.min_size", ConfigType::integer, "Smallest object (pixels)",
                       "Objects found in the output with fewer pixels than this are dropped; 0 keeps all.");
    k.min = 0;
    k.max = 1e9;
    bind(k, &Config::instances, &I::min_size);
  }
  bind(add("instances.tune_thresholds", ConfigType::boolean, "Tune thresholds",
           "After each validation, search the seed and foreground thresholds that give the best DSB score "
           "on the validation set, and keep them with the model; false: use instances.seed_threshold and "
           "instances.foreground_threshold."),
       &Config::instances, &I::tune_thresholds);
  {
    ConfigKey& k =
        add("instances.seed_threshold", ConfigType::number, "Seed threshold",
            "An object's seed is where the interior probability (boundary) or the foreground "
            "probability (weight_map) exceeds this; tuned when instances.tune_thresholds is true.");
    k.min = 0;
    k.max = 1;
    bind(k, &Config::instances, &I::seed_threshold);
  }
  {
    ConfigKey& k = add("instances.foreground_threshold", ConfigType::number, "Foreground threshold",
                       "Seeds grow over the pixels whose foreground probability exceeds this; tuned when "
                       "instances.tune_thresholds is true.");
    k.min = 0;
    k.max = 1;
    bind(k, &Config::instances, &I::foreground_threshold);
  }
}

}  // namespace unet::schema_rows
