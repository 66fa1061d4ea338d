// placeholder: filled in by issue 3 work in progress
#include <systemc>
int sc_main(int, char**) { return 0; }
