// The Python module gnnscale._C only exists so that `import gnnscale._C` loads the library:
// each domain (csrc/<domain>/<op>.cpp) defines its schemas with TORCH_LIBRARY_FRAGMENT and its
// kernels (csrc/<domain>/cpu/, csrc/<domain>/cuda/) register with TORCH_LIBRARY_IMPL.
#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "gnnscale native ops; call them through gnnscale.ops";
}
