// Storage released and restored, see core/storage.h.
#include "dtlab/core/storage.h"

namespace dtlab {

void release_storage(const torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void restore_storage(const torch::Tensor& t, size_t bytes) {
  if (holds_storage(t, bytes)) return;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

bool holds_storage(const torch::Tensor& t, size_t bytes) { return t.storage().nbytes() >= bytes; }

}  // namespace dtlab
