// Writes checkpoints on a background thread, one at a time in the order they were asked for, so that training
// waits only for the copy of the model to the host, never for serialising, hashing and fsync. The training
// thread collects the results and reports them: a save is reported done only once its file is committed
// (written, synced, renamed), and a failed save (full disk, read-only folder) is reported while training goes
// on.
//
// Periodic checkpoints are pruned here, after each commit: only the newest `keep_last` survive (0 keeps all),
// and an old file is deleted only once the new one is safely on disk.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "unet/io/checkpoint.h"

namespace unet {

class CheckpointWriter {
 public:
  struct Target {
    std::filesystem::path path;
    std::string reason;     // "periodic", "best", "last", "requested"
    bool periodic = false;  // counts toward keep_last
  };
  struct Result {
    std::filesystem::path path;
    std::string reason;
    std::int64_t step = 0, epoch = 0;
    nlohmann::json metrics;    // the saved state's (TrainingPosition::metrics)
    std::exception_ptr error;  // null: committed
    std::vector<std::filesystem::path> pruned;
  };

  // `earlier_periodic`: periodic files of this run written before (a resumed run), oldest first.
  CheckpointWriter(std::int64_t keep_last, std::vector<std::filesystem::path> earlier_periodic = {});
  ~CheckpointWriter();  // finishes what was asked
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void submit(Checkpoint checkpoint, std::vector<Target> targets);
  // Results of the saves finished since the last call.
  std::vector<Result> collect();
  // Blocks until every submitted save has finished.
  void wait_idle();
  bool busy() const;

 private:
  struct Job {
    Checkpoint checkpoint;
    std::vector<Target> targets;
  };
  void loop();

  std::int64_t keep_last_;
  std::vector<std::filesystem::path> periodic_;  // committed, oldest first; touched by the writer thread only
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool working_ = false;
  bool quit_ = false;
  std::vector<Result> results_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace unet
