// Replay keys: everything about a call that decides which kernels a provider launches with which parameters.
#include "replay/plan.h"
#include "runtime/runtime.h"

#include <c10/util/hash.h>

#include <cstring>

namespace torch_fl::replay {
namespace {

enum Tag : int64_t { kNone = 1, kTensor, kInt, kDouble, kBool, kScalar, kString, kIntList, kDoubleList, kBoolList,
  kTensorList, kDevice, kUndefined };

int64_t bits_of(double d) {
  int64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

class Builder {
 public:
  Builder(Key* key, std::vector<at::Tensor>* slots)
      : w_(key->words), slots_(slots), host_scalars_by_value_(runtime().vendor_type() != c10::DeviceType::CPU) {}

  void tensor(const at::Tensor& t) {
    if (!t.defined()) {
      w_.push_back(kUndefined);
      slots_->push_back(t);
      return;
    }
    const int64_t dim = t.dim();
    w_.push_back(kTensor);
    w_.push_back(static_cast<int64_t>(t.scalar_type()) | (dim << 8) |
        (static_cast<int64_t>(t.device().index()) << 16) |
        // Triton specializes pointers on 16-byte alignment; offsets into a tensor inherit its residue
        (static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) << 24));
    for (int64_t s : t.sizes()) w_.push_back(s);
    for (int64_t s : t.strides()) w_.push_back(s);
    // Two slots on one storage: their distance is part of the key, so a pointer traced to one slot stays right
    // in every call with this key (add(x, x) and add(x, y) get different keys).
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    int64_t shared = -1, delta = 0;
    for (size_t i = 0; i < slots_->size(); ++i) {
      const at::Tensor& o = (*slots_)[i];
      if (o.defined() && o.storage().unsafeGetStorageImpl() == storage) {
        shared = static_cast<int64_t>(i);
        delta = static_cast<const char*>(t.data_ptr()) - static_cast<const char*>(o.data_ptr());
        break;
      }
    }
    w_.push_back(shared);
    w_.push_back(delta);
    // A Python number passed as a tensor (x + 1.0) or another host scalar: a provider reads its value on the
    // host or copies it to the device, so the value is part of the key (reading it costs no device sync).
    if (t.dim() == 0 && t.device().is_cpu() &&
        (t.unsafeGetTensorImpl()->is_wrapped_number() || host_scalars_by_value_)) {
      const c10::Scalar v = t.item();
      w_.push_back(v.isComplex() ? bits_of(v.toComplexDouble().real()) : v.isFloatingPoint() ? bits_of(v.toDouble())
                                                                                               : v.toLong());
      w_.push_back(v.isComplex() ? bits_of(v.toComplexDouble().imag()) : 0);
    }
    slots_->push_back(t);
  }

  // nullptr, or why this value cannot be part of a key.
  const char* value(const c10::IValue& v) {
    if (v.isNone() || (v.isTensor() && !v.toTensor().defined())) {
      // An undefined tensor in a Tensor? argument (autograd passes nll_loss_backward's absent weight so) reaches
      // a Python provider as None and takes no slot there (torch_fl/replay/_record.py): here neither.
      w_.push_back(kNone);
    } else if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isInt()) {
      w_.push_back(kInt);
      w_.push_back(v.toInt());
    } else if (v.isDouble()) {
      w_.push_back(kDouble);
      w_.push_back(bits_of(v.toDouble()));
    } else if (v.isBool()) {
      w_.push_back(kBool);
      w_.push_back(v.toBool());
    } else if (v.isComplexDouble()) {
      const c10::complex<double> c = v.toComplexDouble();
      w_.push_back(kScalar);
      w_.push_back(bits_of(c.real()));
      w_.push_back(bits_of(c.imag()));
    } else if (v.isString()) {
      const std::string& s = v.toStringRef();
      header(kString, s.size());
      for (size_t i = 0; i < s.size(); i += 8) {
        int64_t chunk = 0;
        std::memcpy(&chunk, s.data() + i, std::min<size_t>(8, s.size() - i));
        w_.push_back(chunk);
      }
    } else if (v.isIntList()) {
      words(kIntList, v.toIntList(), [](int64_t x) { return x; });
    } else if (v.isDoubleList()) {
      words(kDoubleList, v.toDoubleList(), [](double x) { return bits_of(x); });
    } else if (v.isBoolList()) {
      words(kBoolList, v.toBoolList(), [](bool x) { return int64_t{x}; });
    } else if (v.isTensorList()) {
      const auto list = v.toTensorList();
      header(kTensorList, list.size());
      for (const at::Tensor& t : list) tensor(t);
    } else if (v.isList()) { // Tensor?[] (index): each element a slot, None ones undefined
      const auto list = v.toList();
      header(kTensorList, list.size());
      for (const c10::IValue& e : list) {
        if (e.isTensor()) {
          tensor(e.toTensor());
        } else if (e.isNone()) {
          tensor(at::Tensor());
        } else {
          return "a list argument of an unknown kind";
        }
      }
    } else if (v.isDevice()) {
      w_.push_back(kDevice);
      w_.push_back(static_cast<int64_t>(v.toDevice().type()) << 8 | static_cast<uint8_t>(v.toDevice().index()));
    } else if (v.isGenerator()) {
      return "a generator argument (random numbers differ on every call)";
    } else {
      return "an argument type the replay key does not cover";
    }
    return nullptr;
  }

 private:
  // A sequence's tag and length, before its elements.
  void header(Tag tag, size_t size) {
    w_.push_back(tag);
    w_.push_back(static_cast<int64_t>(size));
  }
  // A list of numbers: its header, then one word per element.
  template <class List, class Word>
  void words(Tag tag, const List& list, Word word) {
    header(tag, list.size());
    for (const auto& x : list) w_.push_back(word(x));
  }

  std::vector<int64_t>& w_;
  std::vector<at::Tensor>* slots_;
  bool host_scalars_by_value_;
};

} // namespace

const char* make_key(const c10::OperatorHandle& op, const torch::jit::Stack& stack, Key* key,
    std::vector<at::Tensor>* slots) {
  const auto& args = op.schema().arguments();
  const size_t first = stack.size() - args.size();
  key->op = &op.schema();
  key->words.clear();
  key->words.reserve(16 + 8 * args.size());
  slots->clear();
  Builder b(key, slots);
  for (size_t i = 0; i < args.size(); ++i) {
    if (const char* why = b.value(stack[first + i])) return why;
  }
  size_t h = reinterpret_cast<uintptr_t>(key->op);
  for (int64_t w : key->words) h = c10::hash_combine(h, static_cast<size_t>(w));
  key->hash = h;
  return nullptr;
}

} // namespace torch_fl::replay
