// The Chakra execution-trace importer: MLCommons Chakra's protobuf ET (schema/protobuf/et_def.proto,
// ChakraProtoMsg), one rank's file, into dtsuite's trace. The file is a GlobalMetadata message, then
// Node messages, each prefixed by its length as a varint (Chakra's protolib encodeMessage), plain or
// gzip (read through zlib as it streams). dtsuite reads the protobuf wire format itself (no
// libprotobuf): unknown fields are skipped by their wire type, so later schema versions still read.
//
// What becomes an op, in file order (Chakra writes its graph by node id; taken as issue order):
//   COMM_COLL_NODE   with comm_type and comm_size: all_reduce, reduce, all_gather, broadcast,
//                    all_to_all, reduce_scatter (REDUCE_SCATTER and REDUCE_SCATTER_BLOCK), barrier.
//                    GATHER and SCATTER have no dtsuite op: skipped, counted. Without comm_type (a
//                    host-side node): skipped, counted.
//   COMM_SEND_NODE   send, peer comm_dst; COMM_RECV_NODE: recv, peer comm_src; tag comm_tag. The
//                    peers are taken as global ranks, on the world group.
//   other nodes      ignored (compute, memory, metadata), not counted.
// Chakra has no dtype, reduction op or root: count is bytes (dtype none), redop none, and
// broadcast and reduce replay from root 0. seconds is duration_micros where above 0.
//
// comm_size: Chakra's PyTorch converter (src/converter/pytorch_node.py, comm_size) sums the bytes
// of the collective's INPUT tensors. That is dtsuite's count for all_reduce, broadcast, reduce and
// all_gather (each rank's input); for reduce_scatter it is the whole input, group size x each
// rank's output, and for all_to_all the bytes sent to all peers: both are divided by the group
// size (a remainder: recorded as given, with a note).
//
// Groups: group 0 is the world. A collective's pg_name is mapped to its members where a
// "process_group:init" METADATA_NODE before it lists them (PyTorch's pg_config_info JSON in its
// inputs: "pg_name" and "ranks", an empty list meaning every rank); otherwise it replays on the world
// (noted). Rank and world size: GlobalMetadata attributes "rank" and "world_size" where a producer
// writes them (the schema has none), else ImportOptions::rank and ::world.
//
// Errors, each one line naming the file: Error{invalid_argument} for a file that is not a Chakra ET
// (its first message is no GlobalMetadata), one cut short ("truncated Chakra trace at byte N"), a
// malformed message, a message above 64 MiB, a varint above 10 bytes, corrupt gzip, no rank or world
// size from the trace or the options; Error{io} and Error{timeout} as InputFile's.
#pragma once
#include <string>

#include "trace/import.h"
#include "trace/trace.h"

namespace dts::trace {

// The most bytes one message may hold: memory is bounded by one message. It is far above what a node
// holds (its inputs and outputs as text, an entry per tensor), so a length above it is a corrupt
// trace or another kind of file.
inline constexpr int64_t kMaxChakraMessage = int64_t{64} << 20;

ImportSummary import_chakra(const std::string& path, TraceSink& sink, const ImportOptions& options);

}  // namespace dts::trace
