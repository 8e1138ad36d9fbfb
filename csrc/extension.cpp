// The Python module gnnscale._C only exists so that `import gnnscale._C` loads the library:
// each domain (csrc/<domain>/<op>.cpp) defines its schemas with TORCH_LIBRARY_FRAGMENT and its
// kernels (csrc/<domain>/cpu/, csrc/<domain>/cuda/) register with TORCH_LIBRARY_IMPL. The module
// is written against Python's C API alone: <torch/extension.h> (pybind11 and all of torch's C++
// API) took more compile time than every op together.
#include <Python.h>

#ifndef TORCH_EXTENSION_NAME
#define TORCH_EXTENSION_NAME _C
#endif
#define GNNSCALE_CAT(a, b) a##b
#define GNNSCALE_INIT(name) GNNSCALE_CAT(PyInit_, name)
#define GNNSCALE_STR2(x) #x
#define GNNSCALE_STR(x) GNNSCALE_STR2(x)

static struct PyModuleDef gnnscale_module = {
    PyModuleDef_HEAD_INIT, GNNSCALE_STR(TORCH_EXTENSION_NAME),
    "gnnscale native ops; call them through gnnscale.ops", -1, nullptr};

PyMODINIT_FUNC GNNSCALE_INIT(TORCH_EXTENSION_NAME)(void) {
  return PyModule_Create(&gnnscale_module);
}
