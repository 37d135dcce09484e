#include "dtlab/core/main.h"
int main() { return dtlab::run_main("task1", [] { return 0; }); }
