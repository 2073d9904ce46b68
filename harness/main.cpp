// dtsuite: benchmark and conformance suite for distributed training stacks.
// Usage: mpirun -np 4 dtsuite run collectives   (see dtsuite --help, README.md)
#include "harness/runner.h"

int main(int argc, char** argv) { return dts::harness_main(argc, argv); }
