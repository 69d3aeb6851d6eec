// How the workbench draws a task-instances model's objects over an image: each object in a colour of its own,
// stable for its id (the same object, the same colour, whatever else is found), and the words for one
// object's row of the table `predict` writes.
#pragma once

#include <QColor>
#include <QImage>
#include <QString>

#include "unet/objects/instance_extraction.h"
#include "unet/objects/label_image.h"

namespace unet::gui {

// Object `id`'s colour (id > 0): its hue id times the golden ratio's fraction, modulo 1, so that consecutive
// ids (neighbours in raster order, often neighbours in the image) lie far apart on the colour wheel.
QColor object_colour(ObjectId id);

// An ImageView layer of a label image: each object in object_colour(id), fully covering; the background
// clear.
QImage object_layer(const LabelImage& labels);

// One object's row: "Object 3: 120 px, centroid (y 12.4, x 30.1), box y0 5, x0 22, y1 20, x1 38, mean
// probability 0.931".
QString object_row_text(const ObjectDescription& object);

}  // namespace unet::gui
