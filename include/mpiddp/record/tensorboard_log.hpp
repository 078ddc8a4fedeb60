#pragma once
// The TensorBoard log: the run's step, eval and epoch records (docs/log-format.md) as
// scalars in a TensorFlow event file, which `tensorboard --logdir DIRECTORY` plots. Written
// by rank 0 only, by hand: no TensorFlow and no protobuf library (Note [event file] in
// src/record/tensorboard_log.cpp).
//
// A record is one event at the record's "step" or, for a record without one, at its epoch.
// Its scalars (tags), from the fields it has, as floats (TensorBoard's simple_value):
//   loss -> train/loss          lr -> train/lr              grad_norm -> train/grad_norm
//   train_loss -> train/epoch_loss                          samples_per_s -> train/samples_per_s
//   eval_loss -> eval/loss      eval_accuracy -> eval/accuracy  eval_loss_ema -> eval/loss_ema
//   eval_bpb -> eval/bpb (text models)
// Records of other kinds, and other fields, are left out.
//
// The file is events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>.mpiddp in the
// directory. TensorBoard reads every file whose name contains "tfevents", in name order;
// the seconds come first, as TensorFlow's, so a resumed run's file sorts after the first
// one's; host and pid keep two runs started in the same second (a restart, two jobs logging
// to one directory) apart, and the file is created exclusively, so neither truncates the other.
//
// What survives a failure (as the JSON Lines log, docs/reliability.md): each event is
// written and flushed whole; the file is fsync'ed when the run ends; a directory that cannot
// be created or written, or a full disk, is an Error(kExitOutput) naming it.
#include <cstdio>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::record {

class TensorboardLog {
 public:
  // Creates the directory (and its parents) when missing and the event file in it, and
  // writes the file's first event (its version). Called before the first step, so a bad
  // directory fails before any work is done.
  explicit TensorboardLog(const std::string& directory);
  ~TensorboardLog();  // fsyncs the file
  TensorboardLog(const TensorboardLog&) = delete;
  TensorboardLog& operator=(const TensorboardLog&) = delete;

  // Appends the record's event if its kind is step, eval or epoch and it has a scalar.
  void write(const io::Json& record);

  // The event file's path.
  const std::string& file() const { return file_path_; }

 private:
  void write_event(const std::string& event);

  std::string file_path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpiddp::record
