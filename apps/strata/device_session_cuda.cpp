// placeholder, replaced below
#include "apps/strata/device_session_cpu.cpp"
