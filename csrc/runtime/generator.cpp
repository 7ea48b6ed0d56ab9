// Flagos generators. A flagos generator owns a vendor generator and forwards to it; the router hands the vendor
// generator to the vendor kernels (which check its type), so seeding flagos seeds what those kernels draw from.
#include "runtime/device.h"

#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

namespace torch_fl {
namespace {

class FlagosGenerator final : public c10::GeneratorImpl {
 public:
  FlagosGenerator(c10::DeviceIndex index, at::Generator vendor)
      : c10::GeneratorImpl(flagos_device(index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        vendor_(std::move(vendor)) {}

  const at::Generator& vendor() const { return vendor_; }

  void set_current_seed(uint64_t seed) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.set_current_seed(seed);
  }
  void set_offset(uint64_t offset) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.set_offset(offset);
  }
  uint64_t get_offset() const override { return vendor_.get_offset(); }
  uint64_t current_seed() const override { return vendor_.current_seed(); }
  uint64_t seed() override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    return vendor_.seed();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    std::lock_guard<std::mutex> lock(vendor_.mutex());
    vendor_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return vendor_.unsafeGetGeneratorImpl()->get_state();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  FlagosGenerator* clone_impl() const override {
    return new FlagosGenerator(device().index(), vendor_.clone());
  }
  at::Generator vendor_;
};

std::vector<at::Generator>& default_generators() {
  static std::vector<at::Generator> generators;
  return generators;
}

} // namespace

void create_default_generators(Runtime& rt) {
  for (c10::DeviceIndex i = 0; i < rt.device_count(); ++i) {
    default_generators().push_back(at::make_generator<FlagosGenerator>(i, rt.vendor_generator(i)));
  }
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  const auto i = checked_index(index);
  auto& generators = default_generators();
  TORCH_CHECK(i >= 0 && i < static_cast<c10::DeviceIndex>(generators.size()), "no flagos device ", int(i));
  return generators[i];
}

at::Generator new_generator(c10::DeviceIndex index) {
  const auto i = checked_index(index);
  return at::make_generator<FlagosGenerator>(i, runtime().new_vendor_generator(i));
}

at::Generator vendor_generator_of(const at::Generator& gen) {
  if (!gen.defined() || gen.device().type() != c10::DeviceType::PrivateUse1) return gen;
  return static_cast<FlagosGenerator*>(gen.unsafeGetGeneratorImpl())->vendor();
}

} // namespace torch_fl
