// Long work off the GUI thread, in one shape: PrismLauncher's Task (review 3.6 and 4). A Task lives on the
// GUI thread and runs its execute() on a thread of its own; it moves Inactive → Running → Succeeded, Failed
// or Aborted, and says so with signals. The one rule: every state change happens on the GUI thread (the
// work's end is posted back), so a caller that has just started a task sees it Running until its own event
// loop turns, however fast the work is.
//
// A subclass puts its inputs in its constructor, does the work in execute() (throwing to fail), and keeps its
// results in members that the GUI reads once the task has ended. A subclass with members that execute()
// touches calls end_work() first thing in its destructor: Task's own destructor runs after those members
// are gone.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <functional>
#include <memory>
#include <stop_token>

namespace unet::gui {

class Task : public QObject {
  Q_OBJECT
 public:
  enum class State { inactive, running, succeeded, failed, aborted };

  explicit Task(QObject* parent = nullptr);
  // Aborts and waits for the work to end (end_work()): a task never outlives its thread.
  ~Task() override;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  State state() const { return state_; }
  bool running() const { return state_ == State::running; }
  // Why it failed (the exception's message); empty unless failed.
  QString failure() const { return failure_; }

  // From the GUI thread, once: Running, and execute() begins on the task's thread.
  void start();
  // From any thread. A task whose work has not begun ends Aborted without running it; a running one sees
  // it through abort_requested() or stop_token() and ends Aborted if it says so (ended_aborted()).
  void abort();
  bool abort_requested() const { return stop_.stop_requested(); }

 signals:
  // `current` of `total` through; `what`: the step just done, in words (may be empty).
  void progress(qint64 current, qint64 total, const QString& what);
  void succeeded();
  void failed(const QString& reason);
  void aborted();
  // After succeeded, failed or aborted.
  void finished(unet::gui::Task::State state);

 protected:
  // The work, on the task's thread. Throws to fail; returns to succeed, or to end Aborted after
  // ended_aborted().
  virtual void execute() = 0;
  // For engine calls that take one (the predictor's), and for a std::stop_callback that hands abort() to
  // work that has its own stop (the trainer's).
  std::stop_token stop_token() const { return stop_.get_token(); }
  // Aborts and waits until execute() has returned; from a subclass's destructor (see above), and safe to call
  // again.
  void end_work();
  // From execute(): the task ends Aborted (it stopped short, or the user declined what it asked).
  void ended_aborted() { ended_aborted_ = true; }
  // From execute(): emitted on the GUI thread (a queued connection).
  void report_progress(qint64 current, qint64 total, const QString& what = {}) {
    emit progress(current, total, what);
  }

 private:
  void finish(State state, const QString& reason);

  State state_ = State::inactive;
  QString failure_;
  std::stop_source stop_;
  bool ended_aborted_ = false;  // written by execute() before the end is posted
  std::unique_ptr<QThread> thread_;
};

// Starts `task` as a child of `owner`, which keeps it until it has ended and `done` (on the GUI thread) has
// seen its outcome; then it is deleted. Returns the task.
Task* start_owned(Task* task, QObject* owner, std::function<void()> done);

}  // namespace unet::gui

Q_DECLARE_METATYPE(unet::gui::Task::State)
