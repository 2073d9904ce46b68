// The recorder behind `run --record-trace DIR`: a wrapper around the stack under test that
// writes each call this rank makes to DIR/rank-R.jsonl (trace/trace.h) and forwards it
// unchanged, so that whatever a suite or strategy sends is the trace, on any backend.
//
// What a line says of timing: on host backends a call is done when it returns, and its line
// carries the seconds it took (waiting for late peers included, as any traced job's); a device
// backend's call returns once enqueued, so its lines carry none. Asynchronous calls (isend,
// irecv, all_reduce_async) are written when issued, and a wait line when they complete (wait(),
// or the test() that first finds them done). A call that throws is not written: it never ran.
// The harness's own traffic (verification, timing gathers) goes over its control communicator
// and is not part of the trace.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace dts::trace {

// One rank's trace being written: shared by the world communicator and every group split from
// it, and by a communicator made anew after an abort (its group line then comes again).
class Recording;
std::shared_ptr<Recording> start_recording(const std::string& dir, int rank, int world, const std::string& backend);
// Flushes and closes the file (Error{io} if it could not be written).
void finish_recording(Recording& recording);

// `world`, a communicator over every rank of the job, recorded into `recording`.
std::unique_ptr<Communicator> record_calls(std::unique_ptr<Communicator> world, std::shared_ptr<Recording> recording);

}  // namespace dts::trace
