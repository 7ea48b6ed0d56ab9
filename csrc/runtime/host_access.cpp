// See host_access.h. Blocks are registered twice: in a map (under a mutex) that counts who has a
// block open, and in a fixed table of address ranges that the signal handler can scan without
// taking a lock.
#include "runtime/host_access.h"

#include <c10/util/Exception.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace torch_fl::host_access {
namespace {

std::atomic<bool> g_enabled{false};

struct Block {
  size_t mapped;  // bytes mapped (whole pages)
  int open_count; // calls that have it open now
  size_t slot;    // index in g_ranges
  uint64_t id;    // a freed block's address can come back for a new one within one call: ids tell them apart
};
uint64_t g_next_id = 1; // under blocks_mutex

std::mutex& blocks_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, Block>& blocks() {
  static auto* map = new std::unordered_map<const void*, Block>(); // leaked: freed tensors may outlive statics
  return *map;
}

// Live block ranges for the signal handler: begin == 0 marks a free slot.
constexpr size_t kSlots = size_t{1} << 18;
struct Range {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
};
Range g_ranges[kSlots];
size_t g_next_slot = 0; // under blocks_mutex

struct sigaction g_previous;

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void write_stderr(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void write_hex(uintptr_t value) {
  char buf[2 + 16 + 1] = "0x";
  for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(value >> (60 - 4 * i)) & 0xf];
  buf[18] = '\0';
  write_stderr(buf);
}

void on_segv(int sig, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (size_t i = 0; i < kSlots; ++i) {
    const uintptr_t begin = g_ranges[i].begin.load(std::memory_order_relaxed);
    if (begin != 0 && address >= begin && address < g_ranges[i].end.load(std::memory_order_relaxed)) {
      write_stderr("\n[flagos trap] host access to flagos device memory at ");
      write_hex(address);
      write_stderr(" (block ");
      write_hex(begin);
      write_stderr(
          "): code read or wrote an emulated device tensor's bytes on the host, outside the router's "
          "re-tagged kernels. On an accelerator this would crash or read garbage. Move the tensor with "
          ".cpu() first, or let the op run through the flagos router (FLAGOS_EMU_TRAP=1 is on).\n");
      break;
    }
  }
  // Hand over to whoever was there before (Python's faulthandler, or the default action): the
  // faulting access runs again and ends the process with the usual report.
  sigaction(SIGSEGV, &g_previous, nullptr);
  (void)sig;
  (void)context;
}

void protect(const void* data, size_t mapped, int prot) {
  TORCH_CHECK(mprotect(const_cast<void*>(data), mapped, prot) == 0, "FLAGOS_EMU_TRAP: mprotect failed: ",
      std::strerror(errno));
}

} // namespace

void enable() {
  if (g_enabled.exchange(true)) return;
  struct sigaction action {};
  action.sa_sigaction = &on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  TORCH_CHECK(sigaction(SIGSEGV, &action, &g_previous) == 0, "FLAGOS_EMU_TRAP: cannot install the SIGSEGV handler");
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void* allocate_block(size_t nbytes) {
  const size_t mapped = (nbytes + page_size() - 1) / page_size() * page_size();
  void* data = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(data != MAP_FAILED, "FLAGOS_EMU_TRAP: cannot map ", mapped, " bytes: ", std::strerror(errno));
  std::lock_guard<std::mutex> lock(blocks_mutex());
  size_t slot = kSlots;
  for (size_t tried = 0; tried < kSlots; ++tried, g_next_slot = (g_next_slot + 1) % kSlots) {
    if (g_ranges[g_next_slot].begin.load(std::memory_order_relaxed) == 0) {
      slot = g_next_slot;
      break;
    }
  }
  if (slot == kSlots) {
    munmap(data, mapped);
    TORCH_CHECK(false, "FLAGOS_EMU_TRAP: more than ", kSlots,
        " flagos blocks are alive at once; the trap is a debug mode for tests, run this without it");
  }
  g_ranges[slot].end.store(reinterpret_cast<uintptr_t>(data) + mapped, std::memory_order_relaxed);
  g_ranges[slot].begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
  blocks().emplace(data, Block{mapped, 0, slot, g_next_id++});
  return data;
}

void free_block(void* data) {
  std::lock_guard<std::mutex> lock(blocks_mutex());
  auto it = blocks().find(data);
  TORCH_INTERNAL_ASSERT(it != blocks().end(), "FLAGOS_EMU_TRAP: freeing an unknown block");
  g_ranges[it->second.slot].begin.store(0, std::memory_order_release);
  munmap(data, it->second.mapped);
  blocks().erase(it);
}

void Scope::open(const void* data) {
  if (data == nullptr || !enabled()) return;
  std::lock_guard<std::mutex> lock(blocks_mutex());
  auto it = blocks().find(data);
  if (it == blocks().end()) return; // host memory, or a block from before the trap
  for (const auto& [seen, id] : opened_) {
    if (seen == data && id == it->second.id) return;
  }
  if (it->second.open_count++ == 0) protect(data, it->second.mapped, PROT_READ | PROT_WRITE);
  opened_.emplace_back(data, it->second.id);
}

Scope::~Scope() {
  if (opened_.empty()) return;
  std::lock_guard<std::mutex> lock(blocks_mutex());
  for (const auto& [data, id] : opened_) {
    auto it = blocks().find(data);
    // Freed while open (an argument's storage replaced inside the call), maybe with its address reused
    if (it == blocks().end() || it->second.id != id) continue;
    if (--it->second.open_count == 0) {
      try {
        protect(data, it->second.mapped, PROT_NONE);
      } catch (...) { // a destructor must not throw; the block merely stays readable
      }
    }
  }
}

} // namespace torch_fl::host_access
