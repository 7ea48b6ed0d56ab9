// torch-fl-dcu-probe: can this process use a Hygon DCU (or any HIP device)?
//
// Torch-free. Run it before torch when `torch.cuda.device_count()` is 0 on a DCU node, or inside the test
// image of `nox -s test-dcu`. It checks, in order, what breaks most often and says how to fix it:
//   1. /dev/kfd: missing (not passed into the container, or the driver is not loaded) or not accessible
//      (group permissions);
//   2. the HIP runtime library: loaded with dlopen, so a missing dependency such as hyhal's libhydmi.so is
//      reported with the loader's own message instead of stopping the program before main();
//   3. device visibility: HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES hiding devices;
//   4. every visible device: name, gcnArchName, memory, compute units, and a 1 MiB allocate/memset/free.
//
// Exit status: 0 usable devices; 1 usage or unexpected HIP error; 2 /dev/kfd missing; 3 /dev/kfd not
// accessible; 4 the HIP runtime cannot be loaded; 5 no device visible; 6 a device is visible but unusable.
//
// Built with hipcc (DTK in the dcu builder image; Debian's hipcc with HIP_PLATFORM=amd in CI), e.g.
//   hipcc --offload-arch=gfx906 -std=c++17 -O2 -o torch-fl-dcu-probe docker/dcu/probe/dcu_probe.cpp -ldl
#include <hip/hip_runtime_api.h>

#include <dlfcn.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char* kVersion = "1";

enum Exit : int {
  kOk = 0,
  kUsage = 1,
  kNoKfd = 2,
  kKfdDenied = 3,
  kNoRuntime = 4,
  kNoDevice = 5,
  kDeviceUnusable = 6,
};

// The HIP runtime, opened with dlopen. The symbol names come from the header the probe is built against:
// HIP 6 renames some entry points with macros (hipGetDeviceProperties -> hipGetDevicePropertiesR0600),
// and stringizing the macro picks the name whose struct layout matches that header.
#define TFL_STR2(x) #x
#define TFL_STR(x) TFL_STR2(x)

struct Hip {
  void* handle = nullptr;
  std::string path;
  decltype(&hipRuntimeGetVersion) runtimeGetVersion = nullptr;
  decltype(&hipDriverGetVersion) driverGetVersion = nullptr;
  decltype(&hipGetDeviceCount) getDeviceCount = nullptr;
  decltype(&hipGetDeviceProperties) getDeviceProperties = nullptr;
  decltype(&hipSetDevice) setDevice = nullptr;
  hipError_t (*malloc_)(void**, size_t) = nullptr; // hipMalloc is overloaded (a template helper)
  decltype(&hipMemset) memset_ = nullptr;
  decltype(&hipDeviceSynchronize) deviceSynchronize = nullptr;
  decltype(&hipFree) free_ = nullptr;
  decltype(&hipGetErrorName) errorName = nullptr;

  template <typename F>
  bool bind(F& fn, const char* name, std::string& missing) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    return fn != nullptr;
  }

  // Returns "" on success, else the missing symbols.
  std::string bind_all() {
    std::string missing;
    bind(runtimeGetVersion, TFL_STR(hipRuntimeGetVersion), missing);
    bind(driverGetVersion, TFL_STR(hipDriverGetVersion), missing);
    bind(getDeviceCount, TFL_STR(hipGetDeviceCount), missing);
    bind(getDeviceProperties, TFL_STR(hipGetDeviceProperties), missing);
    bind(setDevice, TFL_STR(hipSetDevice), missing);
    bind(malloc_, TFL_STR(hipMalloc), missing);
    bind(memset_, TFL_STR(hipMemset), missing);
    bind(deviceSynchronize, TFL_STR(hipDeviceSynchronize), missing);
    bind(free_, TFL_STR(hipFree), missing);
    bind(errorName, TFL_STR(hipGetErrorName), missing);
    return missing;
  }

  std::string err(hipError_t e) const {
    return std::string(errorName ? errorName(e) : "hipError") + " (" + std::to_string(static_cast<int>(e)) + ")";
  }
};

struct Options {
  std::string dev_root = "/dev";
  std::string hyhal_root = "/opt/hyhal";
  std::vector<std::string> libraries = {
      // DTK ships libgalaxyhip next to an libamdhip64 compatibility name; upstream ROCm only the latter.
      "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "libgalaxyhip.so", "libgalaxyhip.so.6",
      "libgalaxyhip.so.5"};
  bool quiet = false;
};

bool g_quiet = false;

void say(const std::string& line) {
  if (!g_quiet) std::printf("%s\n", line.c_str());
}

// The one line that matters, always printed (also with --quiet), then the exit status.
int verdict(int code, const std::string& line) {
  std::fflush(stdout);
  std::fprintf(code == kOk ? stdout : stderr, "torch-fl-dcu-probe: %s\n", line.c_str());
  return code;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? std::string("'") + v + "'" : std::string(fallback);
}

std::string group_name(gid_t gid) {
  const struct group* g = getgrgid(gid);
  return g ? std::string(g->gr_name) : std::string("gid ") + std::to_string(gid);
}

std::string my_groups() {
  std::vector<gid_t> gids(static_cast<size_t>(getgroups(0, nullptr)) + 1);
  const int n = getgroups(static_cast<int>(gids.size()), gids.data());
  std::string out = std::to_string(getgid());
  for (int i = 0; i < n; ++i) {
    if (gids[i] != getgid()) out += "," + std::to_string(gids[i]);
  }
  return out;
}

int check_kfd(const Options& opt) {
  const std::string kfd = opt.dev_root + "/kfd";
  struct stat st {};
  if (stat(kfd.c_str(), &st) != 0) {
    return verdict(kNoKfd,
        kfd + " does not exist. In a container: pass the devices, `docker run --device=/dev/kfd "
        "--device=/dev/dri --group-add video --security-opt seccomp=unconfined ...` (nox -s test-dcu does). On "
        "the host: the DCU kernel driver is not loaded (check `lsmod | grep hydcu` / `hy-smi`).");
  }
  say(kfd + ": present (owner uid " + std::to_string(st.st_uid) + ", group " + group_name(st.st_gid) + ")");
  if (access(kfd.c_str(), R_OK | W_OK) != 0) {
    return verdict(kKfdDenied,
        kfd + " is not readable and writable by uid " + std::to_string(getuid()) + " (groups " + my_groups() +
            "): it belongs to group " + group_name(st.st_gid) + " (gid " + std::to_string(st.st_gid) +
            "). Add that group: `docker run --group-add " + std::to_string(st.st_gid) +
            " ...`, or on the host `usermod -aG " + group_name(st.st_gid) + " $USER` and log in again.");
  }
  const std::string dri = opt.dev_root + "/dri";
  struct stat dst {};
  if (stat(dri.c_str(), &dst) != 0) {
    say("warning: " + dri + " does not exist: pass it too (`--device=/dev/dri`); kernels cannot run without it");
  }
  return kOk;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// hyhal (/opt/hyhal) carries libhydmi.so, which DTK's runtime needs on Hygon hosts.
std::string hyhal_note(const Options& opt) {
  void* h = dlopen("libhydmi.so", RTLD_LAZY | RTLD_LOCAL);
  if (h != nullptr) {
    dlclose(h);
    return "libhydmi.so (hyhal): loadable";
  }
  const std::string lib = opt.hyhal_root + "/lib/libhydmi.so";
  if (file_exists(lib)) {
    return "libhydmi.so (hyhal): " + lib + " exists but is not on the loader path: source /opt/dtk/env.sh or add " +
        opt.hyhal_root + "/lib to LD_LIBRARY_PATH";
  }
  return "libhydmi.so (hyhal): not found; on a Hygon host mount it into the container read-only: `-v " +
      opt.hyhal_root + ":" + opt.hyhal_root + ":ro` (nox -s test-dcu does when the host has it)";
}

int open_runtime(const Options& opt, Hip& hip) {
  std::string tried;
  bool hydmi = false;
  for (const auto& name : opt.libraries) {
    hip.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (hip.handle != nullptr) {
      hip.path = name;
      break;
    }
    const char* e = dlerror();
    const std::string why = e ? e : "unknown error";
    hydmi = hydmi || why.find("hydmi") != std::string::npos;
    tried += "\n  " + why;
  }
  if (hip.handle == nullptr) {
    say("could not load the HIP runtime:" + tried);
    if (hydmi) {
      return verdict(kNoRuntime, "the HIP runtime needs libhydmi.so (hyhal), which is missing: " + hyhal_note(opt));
    }
    return verdict(kNoRuntime,
        "no HIP runtime library could be loaded (libamdhip64.so / libgalaxyhip.so): source /opt/dtk/env.sh "
        "(DTK) or add the ROCm lib directory to LD_LIBRARY_PATH");
  }
  const std::string missing = hip.bind_all();
  if (!missing.empty()) {
    return verdict(kNoRuntime, hip.path + " lacks " + missing + ": it is older than the HIP headers this probe "
        "was built with (HIP " + std::to_string(HIP_VERSION_MAJOR) + "." + std::to_string(HIP_VERSION_MINOR) + ")");
  }
  int runtime = 0, driver = 0;
  if (hip.runtimeGetVersion(&runtime) != hipSuccess) runtime = -1;
  if (hip.driverGetVersion(&driver) != hipSuccess) driver = -1;
  say("HIP runtime: " + hip.path + ", version " + std::to_string(runtime) + ", driver " + std::to_string(driver));
  return kOk;
}

std::string visibility() {
  return "HIP_VISIBLE_DEVICES=" + env_or("HIP_VISIBLE_DEVICES", "<unset>") +
      " ROCR_VISIBLE_DEVICES=" + env_or("ROCR_VISIBLE_DEVICES", "<unset>") +
      " CUDA_VISIBLE_DEVICES=" + env_or("CUDA_VISIBLE_DEVICES", "<unset>");
}

bool hides_devices() {
  for (const char* name : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    const std::string s(v);
    if (s.find_first_not_of(" \t") == std::string::npos || s == "-1" || s == "none") return true;
  }
  return false;
}

bool in_arch_list(const std::string& arch) {
  const char* list = std::getenv("PYTORCH_ROCM_ARCH");
  if (list == nullptr) return true;
  const std::string base = arch.substr(0, arch.find(':'));
  std::string all(list);
  size_t start = 0;
  while (start <= all.size()) {
    const size_t end = all.find_first_of("; ", start);
    if (all.substr(start, end - start) == base) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

int probe_devices(const Options& opt, Hip& hip) {
  say("visibility: " + visibility());
  int count = 0;
  const hipError_t e = hip.getDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    say("hipGetDeviceCount: " + (e == hipSuccess ? std::string("0 devices") : hip.err(e)));
    say(hyhal_note(opt));
    if (hides_devices()) {
      return verdict(kNoDevice, "no device visible because a *_VISIBLE_DEVICES variable hides them all (" +
          visibility() + "): unset it or name the devices, e.g. HIP_VISIBLE_DEVICES=0,1");
    }
    return verdict(kNoDevice,
        "the HIP runtime sees no device (torch.cuda.device_count() will be 0): check `hy-smi` on the host, pass "
        "both --device=/dev/kfd and --device=/dev/dri, run with --security-opt seccomp=unconfined, and mount hyhal "
        "on Hygon hosts (see above)");
  }
  say("devices: " + std::to_string(count));
  int unusable = 0;
  for (int i = 0; i < count; ++i) {
    hipDeviceProp_t p{};
    hipError_t pe = hip.getDeviceProperties(&p, i);
    if (pe != hipSuccess) {
      say("  " + std::to_string(i) + ": hipGetDeviceProperties failed: " + hip.err(pe));
      ++unusable;
      continue;
    }
    char line[512];
    std::snprintf(line, sizeof line, "  %d: %s, %s, %.1f GiB, %d CUs, pci %04x:%02x:%02x", i, p.name,
        p.gcnArchName, static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
        p.pciDomainID, p.pciBusID, p.pciDeviceID);
    std::string status;
    void* ptr = nullptr;
    hipError_t me = hip.setDevice(i);
    if (me == hipSuccess) me = hip.malloc_(&ptr, 1 << 20);
    if (me == hipSuccess) me = hip.memset_(ptr, 0, 1 << 20);
    if (me == hipSuccess) me = hip.deviceSynchronize();
    if (ptr != nullptr) static_cast<void>(hip.free_(ptr));
    if (me == hipSuccess) {
      status = "1 MiB alloc/memset/free ok";
    } else {
      status = "allocation failed: " + hip.err(me);
      ++unusable;
    }
    if (!in_arch_list(p.gcnArchName)) {
      status += "; warning: not in PYTORCH_ROCM_ARCH=" + std::string(std::getenv("PYTORCH_ROCM_ARCH"));
    }
    say(std::string(line) + "; " + status);
  }
  if (unusable > 0) {
    return verdict(kDeviceUnusable, std::to_string(unusable) + " of " + std::to_string(count) +
        " devices are visible but unusable (see above): check /dev/dri permissions (--group-add of the renderD* "
        "group) and `hy-smi` for a device in a bad state");
  }
  return verdict(kOk, std::to_string(count) + (count == 1 ? " device" : " devices") + " usable");
}

void usage() {
  std::printf(
      "usage: torch-fl-dcu-probe [--quiet] [--dev-root DIR] [--hyhal-root DIR] [--library NAME]... [--version]\n"
      "Checks /dev/kfd, the HIP runtime library, device visibility and every visible device; prints one\n"
      "diagnosis line and exits 0 (usable), 2 (/dev/kfd missing), 3 (/dev/kfd not accessible), 4 (HIP runtime\n"
      "not loadable), 5 (no device visible) or 6 (a device is unusable).\n");
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  bool custom_libraries = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "torch-fl-dcu-probe: %s needs a value\n", flag);
        std::exit(kUsage);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      return kOk;
    } else if (a == "--version") {
      std::printf("torch-fl-dcu-probe %s (built with HIP %d.%d)\n", kVersion, HIP_VERSION_MAJOR, HIP_VERSION_MINOR);
      return kOk;
    } else if (a == "--quiet") {
      opt.quiet = true;
    } else if (a == "--dev-root") {
      opt.dev_root = value("--dev-root");
    } else if (a == "--hyhal-root") {
      opt.hyhal_root = value("--hyhal-root");
    } else if (a == "--library") {
      if (!custom_libraries) opt.libraries.clear();
      custom_libraries = true;
      opt.libraries.emplace_back(value("--library"));
    } else {
      std::fprintf(stderr, "torch-fl-dcu-probe: unknown argument '%s'\n", a.c_str());
      usage();
      return kUsage;
    }
  }
  g_quiet = opt.quiet;
  if (const int rc = check_kfd(opt); rc != kOk) return rc;
  Hip hip;
  if (const int rc = open_runtime(opt, hip); rc != kOk) return rc;
  return probe_devices(opt, hip);
}
