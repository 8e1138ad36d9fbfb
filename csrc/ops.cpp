// Declares the torch.ops.gnnscale.* schemas; kernels register their CPU implementations in
// their own files with TORCH_LIBRARY_IMPL. The Python module only exists so that
// `import gnnscale._C` loads the library (and with it the registrations).
#include <torch/extension.h>
#include <torch/library.h>

TORCH_LIBRARY(gnnscale, m) {
  m.def(
      "sample_neighbors(Tensor indptr, Tensor indices, Tensor? weights, Tensor seeds, "
      "int[] fanouts, bool replace, int seed) -> (Tensor, Tensor, Tensor[])");
  m.def("gather_rows(Tensor table, Tensor ids) -> Tensor");
  m.def("gather_rows_out(Tensor table, Tensor ids, Tensor(a!) out) -> Tensor(a!)");
  m.def("advise_huge_pages(Tensor t) -> bool");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "gnnscale native ops; use them through torch.ops.gnnscale";
}
