#include "lib/machine.h"

#include <cstdio>
#include <fstream>
#include <thread>

namespace strata {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

double load_average() {
  std::ifstream loadavg("/proc/loadavg");
  double one_minute = 0;
  if (!(loadavg >> one_minute)) return -1;
  return one_minute;
}

std::string load_context(double one_minute) {
  if (one_minute < 0) return {};
  char buf[96];
  std::snprintf(buf, sizeof buf, "load average %.2f over the last minute on %u CPUs", one_minute,
                std::thread::hardware_concurrency());
  return buf;
}

bool overloaded(double one_minute) {
  const unsigned cpus = std::thread::hardware_concurrency();
  return one_minute >= 0 && cpus > 0 && one_minute > double(cpus);
}

}  // namespace strata
