// The planner's remedies as a user can take them, shown alike in the estimate panel and the out-of-memory
// dialog: under "what would fit, best first" only the remedies whose changes were planned and fit, each with
// Apply; under a heading of their own, without Apply, the others, each saying by how much it misses. Applying
// is the owner's business (apply_requested).
#pragma once

#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include <QWidget>

#include <nlohmann/json.hpp>

#include <vector>

namespace unet {
struct Remedy;
struct RemedyReport;
}  // namespace unet

namespace unet::gui {

// One remedy as either source gives it.
struct RemedyRow {
  QString name, description;
  nlohmann::json changes;
  bool changes_model = false;
  std::int64_t peak_bytes = 0;       // with the change, on the fullest device
  std::int64_t shortfall_bytes = 0;  // how far it misses; 0 when it fits
  bool fits = false;

  static RemedyRow of(const Remedy& r);
  static RemedyRow of(const RemedyReport& r);
};

// The rows of the planner's remedies (Remedy) or a report's (RemedyReport), in their order.
template <class Ranked>
std::vector<RemedyRow> remedy_rows(const std::vector<Ranked>& remedies) {
  std::vector<RemedyRow> rows;
  rows.reserve(remedies.size());
  for (const Ranked& r : remedies) rows.push_back(RemedyRow::of(r));
  return rows;
}

class RemedyList : public QWidget {
  Q_OBJECT
 public:
  explicit RemedyList(QWidget* parent = nullptr);

  // Replaces the rows (best first, as the planner ranks them).
  void show_remedies(const std::vector<RemedyRow>& remedies);
  void clear();
  void set_actions_enabled(bool enabled);

  // The fitting remedies, each with its Apply, in order; and the text of those that would not fit.
  int fitting_count() const { return static_cast<int>(apply_buttons_.size()); }
  QPushButton* apply_button(int i) const { return apply_buttons_.at(static_cast<std::size_t>(i)); }
  QStringList missing_texts() const;

 signals:
  // A remedy's changes, as JSON text of dotted key -> value.
  void apply_requested(const QString& changes_json);

 private:
  QLabel* add_label(const QString& text, QLayout* into);

  QVBoxLayout* rows_;
  std::vector<QWidget*> row_widgets_;
  std::vector<QPushButton*> apply_buttons_;
  std::vector<QLabel*> missing_;
};

}  // namespace unet::gui
