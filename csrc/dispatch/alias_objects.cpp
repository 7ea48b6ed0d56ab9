// See alias_objects.h: fixed-size blocks from mapped slabs, one free list per class.
#include "dispatch/alias_objects.h"

#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>

namespace torch_fl {
namespace {

// Blocks of one size. A freed block goes back on the list (any thread may free an alias: a kernel can keep
// one); slabs are never unmapped, so the pool holds at most the peak number of live aliases.
template <class T>
class BlockPool {
 public:
  void* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_ != nullptr) {
      Free* block = free_;
      free_ = block->next;
      return block;
    }
    if (left_ == 0) grow();
    void* block = next_;
    next_ += kBlock;
    --left_;
    return block;
  }

  void give(void* block) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* entry = static_cast<Free*>(block);
    entry->next = free_;
    free_ = entry;
  }

 private:
  struct Free {
    Free* next;
  };
  static constexpr std::size_t kAlign = alignof(std::max_align_t) > alignof(T) ? alignof(std::max_align_t) : alignof(T);
  static constexpr std::size_t kBlock = (sizeof(T) + kAlign - 1) / kAlign * kAlign;
  static constexpr std::size_t kSlab = std::size_t{1} << 20;

  void grow() {
    void* slab = mmap(nullptr, kSlab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slab == MAP_FAILED) throw std::bad_alloc();
    next_ = static_cast<char*>(slab);
    left_ = kSlab / kBlock;
  }

  std::mutex mutex_;
  Free* free_ = nullptr;
  char* next_ = nullptr;
  std::size_t left_ = 0;
};

// Never destroyed: an alias may be freed by a thread-local pool at thread exit, after static destructors.
template <class T>
BlockPool<T>& pool() {
  static auto* p = new BlockPool<T>();
  return *p;
}

template <class T>
void* take(std::size_t bytes) {
  TORCH_INTERNAL_ASSERT(bytes == sizeof(T), "alias object of ", bytes, " bytes, expected ", sizeof(T));
  return pool<T>().take();
}

} // namespace

void* AliasTensorImpl::operator new(std::size_t bytes) { return take<AliasTensorImpl>(bytes); }
void AliasTensorImpl::operator delete(void* block) noexcept { pool<AliasTensorImpl>().give(block); }
void* AliasStorageImpl::operator new(std::size_t bytes) { return take<AliasStorageImpl>(bytes); }
void AliasStorageImpl::operator delete(void* block) noexcept { pool<AliasStorageImpl>().give(block); }

} // namespace torch_fl
