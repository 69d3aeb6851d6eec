#include "gui/task.h"

#include <exception>

namespace unet::gui {

Task::Task(QObject* parent) : QObject(parent) {
  qRegisterMetaType<Task::State>();
}

Task::~Task() {
  end_work();
}

void Task::end_work() {
  if (!thread_) return;
  abort();
  thread_->wait();
}

void Task::start() {
  Q_ASSERT(state_ == State::inactive);
  state_ = State::running;
  thread_.reset(QThread::create([this] {
    State outcome = State::succeeded;
    QString reason;
    if (abort_requested()) {
      outcome = State::aborted;  // aborted before its work began
    } else {
      try {
        execute();
        if (ended_aborted_) outcome = State::aborted;
      } catch (const std::exception& e) {
        outcome = State::failed;
        reason = QString::fromUtf8(e.what());
      }
    }
    // Posted to this object on the GUI thread; dropped if the task is destroyed first (it waits for this
    // thread, so the posting itself is safe).
    QMetaObject::invokeMethod(
        this, [this, outcome, reason] { finish(outcome, reason); }, Qt::QueuedConnection);
  }));
  thread_->start();
}

void Task::abort() {
  stop_.request_stop();
}

void Task::finish(State state, const QString& reason) {
  thread_->wait();  // its function has returned; the thread is ending
  state_ = state;
  failure_ = reason;
  switch (state) {
    case State::succeeded:
      emit succeeded();
      break;
    case State::failed:
      emit failed(reason);
      break;
    case State::aborted:
      emit aborted();
      break;
    case State::inactive:
    case State::running:
      break;
  }
  emit finished(state);
}

Task* start_owned(Task* task, QObject* owner, std::function<void()> done) {
  task->setParent(owner);
  QObject::connect(task, &Task::finished, owner, [task, done = std::move(done)] {
    done();
    task->deleteLater();
  });
  task->start();
  return task;
}

}  // namespace unet::gui
