// File paths in the order a person reads the numbers in their names: img1, img2, img10 (not img1, img10,
// img2 as text sorts them), letters compared without regard to case; by name first, then by folder. The
// Predict window lists its images so (issue 25: a folder's images came as 0, 1, 10, 2).
#pragma once

#include <QStringList>

namespace unet::gui {

void sort_naturally(QStringList& paths);

}  // namespace unet::gui
