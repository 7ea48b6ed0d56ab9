// torch-fl-dcu-probe: can this process use a Hygon DCU (or any HIP device), and if not, why? Torch-free; usage()
// lists what it checks and its exit statuses, docs/dcu.md when to run it. Built by build_probe.sh, or by hand:
//   hipcc --offload-arch=gfx906 -std=c++17 -O2 -o torch-fl-dcu-probe docker/dcu/probe/dcu_probe.cpp -ldl
#include <hip/hip_runtime_api.h>

#include <dlfcn.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr const char* kVersion = "1";

enum Exit : int { kOk = 0, kUsage = 1, kNoKfd = 2, kKfdDenied = 3, kNoRuntime = 4, kNoDevice = 5, kDeviceUnusable = 6 };

// The runtime is opened with dlopen, so a missing dependency (hyhal's libhydmi.so) is diagnosed instead of stopping
// the program before main(). Names are stringized after macro expansion: HIP 6 renames some entry points
// (hipGetDeviceProperties -> hipGetDevicePropertiesR0600), and the expanded name matches this header's structs.
#define TFL_STR2(x) #x
#define TFL_STR(x) TFL_STR2(x)
#define TFL_SYM(fn) sym<decltype(&fn)>(TFL_STR(fn))

struct Hip {
  Hip(void* h, std::string p) : handle(h), path(std::move(p)) {}
  void* handle;
  std::string path;
  std::string missing; // the entry points the library lacks, filled by the initializers below
  template <typename F>
  F sym(const char* name) {
    void* fn = dlsym(handle, name);
    if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    return reinterpret_cast<F>(fn);
  }
  decltype(&hipRuntimeGetVersion) runtimeGetVersion = TFL_SYM(hipRuntimeGetVersion);
  decltype(&hipDriverGetVersion) driverGetVersion = TFL_SYM(hipDriverGetVersion);
  decltype(&hipGetDeviceCount) getDeviceCount = TFL_SYM(hipGetDeviceCount);
  decltype(&hipGetDeviceProperties) getDeviceProperties = TFL_SYM(hipGetDeviceProperties);
  decltype(&hipSetDevice) setDevice = TFL_SYM(hipSetDevice);
  using Malloc = hipError_t (*)(void**, size_t); // hipMalloc is overloaded (a template helper)
  Malloc malloc_ = sym<Malloc>(TFL_STR(hipMalloc));
  decltype(&hipMemset) memset_ = TFL_SYM(hipMemset);
  decltype(&hipDeviceSynchronize) deviceSynchronize = TFL_SYM(hipDeviceSynchronize);
  decltype(&hipFree) free_ = TFL_SYM(hipFree);
  decltype(&hipGetErrorName) errorName = TFL_SYM(hipGetErrorName);

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

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
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
  if (!exists(opt.dev_root + "/dri")) {
    say("warning: " + opt.dev_root + "/dri does not exist: pass it too (`--device=/dev/dri`); kernels cannot run "
        "without it");
  }
  return kOk;
}

// hyhal (/opt/hyhal) carries libhydmi.so, which DTK's runtime needs on Hygon hosts.
std::string hyhal_note(const Options& opt) {
  void* h = dlopen("libhydmi.so", RTLD_LAZY | RTLD_LOCAL);
  if (h != nullptr) {
    dlclose(h);
    return "libhydmi.so (hyhal): loadable";
  }
  const std::string lib = opt.hyhal_root + "/lib/libhydmi.so";
  if (exists(lib)) {
    return "libhydmi.so (hyhal): " + lib + " exists but is not on the loader path: source /opt/dtk/env.sh or add " +
        opt.hyhal_root + "/lib to LD_LIBRARY_PATH";
  }
  return "libhydmi.so (hyhal): not found; on a Hygon host mount it into the container read-only: `-v " +
      opt.hyhal_root + ":" + opt.hyhal_root + ":ro` (nox -s test-dcu does when the host has it)";
}

int open_runtime(const Options& opt, std::optional<Hip>& hip) {
  std::string tried;
  bool hydmi = false;
  for (const auto& name : opt.libraries) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      hip.emplace(handle, name);
      break;
    }
    const char* e = dlerror();
    const std::string why = e ? e : "unknown error";
    hydmi = hydmi || why.find("hydmi") != std::string::npos;
    tried += "\n  " + why;
  }
  if (!hip) {
    say("could not load the HIP runtime:" + tried);
    if (hydmi) {
      return verdict(kNoRuntime, "the HIP runtime needs libhydmi.so (hyhal), which is missing: " + hyhal_note(opt));
    }
    return verdict(kNoRuntime,
        "no HIP runtime library could be loaded (libamdhip64.so / libgalaxyhip.so): source /opt/dtk/env.sh "
        "(DTK) or add the ROCm lib directory to LD_LIBRARY_PATH");
  }
  if (!hip->missing.empty()) {
    return verdict(kNoRuntime, hip->path + " lacks " + hip->missing + ": it is older than the HIP headers this probe "
        "was built with (HIP " + std::to_string(HIP_VERSION_MAJOR) + "." + std::to_string(HIP_VERSION_MINOR) + ")");
  }
  int runtime = 0, driver = 0;
  if (hip->runtimeGetVersion(&runtime) != hipSuccess) runtime = -1;
  if (hip->driverGetVersion(&driver) != hipSuccess) driver = -1;
  say("HIP runtime: " + hip->path + ", version " + std::to_string(runtime) + ", driver " + std::to_string(driver));
  return kOk;
}

// "HIP_VISIBLE_DEVICES=<unset> ROCR_VISIBLE_DEVICES='' ..."; *hidden is set when one of them hides every device.
std::string visibility(bool* hidden) {
  std::string out;
  for (const char* name : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    const char* v = std::getenv(name);
    out += std::string(out.empty() ? "" : " ") + name + "=" + (v ? std::string("'") + v + "'" : "<unset>");
    const std::string s = v ? v : "";
    if (v && (s.find_first_not_of(" \t") == std::string::npos || s == "-1" || s == "none")) *hidden = true;
  }
  return out;
}

bool in_arch_list(const std::string& arch) {
  const char* list = std::getenv("PYTORCH_ROCM_ARCH");
  if (list == nullptr) return true;
  std::string all = ";" + std::string(list) + ";"; // targets are separated by ';' or ' '
  std::replace(all.begin(), all.end(), ' ', ';');
  return all.find(";" + arch.substr(0, arch.find(':')) + ";") != std::string::npos;
}

int probe_devices(const Options& opt, Hip& hip) {
  bool hidden = false;
  const std::string visible = visibility(&hidden);
  say("visibility: " + visible);
  int count = 0;
  const hipError_t e = hip.getDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    say("hipGetDeviceCount: " + (e == hipSuccess ? std::string("0 devices") : hip.err(e)));
    say(hyhal_note(opt));
    if (hidden) {
      return verdict(kNoDevice, "no device visible because a *_VISIBLE_DEVICES variable hides them all (" +
          visible + "): unset it or name the devices, e.g. HIP_VISIBLE_DEVICES=0,1");
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
    void* ptr = nullptr;
    hipError_t me = hip.setDevice(i);
    if (me == hipSuccess) me = hip.malloc_(&ptr, 1 << 20);
    if (me == hipSuccess) me = hip.memset_(ptr, 0, 1 << 20);
    if (me == hipSuccess) me = hip.deviceSynchronize();
    if (ptr != nullptr) static_cast<void>(hip.free_(ptr));
    std::string status = me == hipSuccess ? "1 MiB alloc/memset/free ok" : "allocation failed: " + hip.err(me);
    unusable += me == hipSuccess ? 0 : 1;
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
      g_quiet = true;
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
  if (const int rc = check_kfd(opt); rc != kOk) return rc;
  std::optional<Hip> hip;
  if (const int rc = open_runtime(opt, hip); rc != kOk) return rc;
  return probe_devices(opt, *hip);
}
