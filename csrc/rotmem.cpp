// The rotmem operator library: schemas of every op (torch.ops.rotmem.*) and the Python module
// rotmem._C that loads them. Kernels register themselves per device in csrc/cpu and csrc/cuda;
// autograd formulas and fake (meta) implementations live in rotmem/ops/native.py.
#include <Python.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

TORCH_LIBRARY(rotmem, m) {
  m.set_python_module("rotmem.ops.native");
  m.def("rotate(Tensor x, Tensor theta) -> Tensor");
  m.def("rotate_backward(Tensor grad, Tensor x, Tensor theta) -> (Tensor, Tensor)");
  m.def("unrotated_query(Tensor h, Tensor w, Tensor? w_hat, Tensor theta) -> Tensor");
  m.def(
      "unrotated_query_backward(Tensor grad, Tensor h, Tensor w, Tensor? w_hat, Tensor theta)"
      " -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "unrotated_query_indexed(Tensor entity, Tensor w_table, Tensor? w_hat_table, Tensor ent_idx,"
      " Tensor rel_idx, Tensor tau, Tensor alpha, Tensor log_s, Tensor log_base, float tau0,"
      " bool sparse_grad) -> Tensor");
  m.def(
      "unrotated_query_indexed_backward(Tensor grad, Tensor entity, Tensor w_table, Tensor? w_hat_table,"
      " Tensor ent_idx, Tensor rel_idx, Tensor tau, Tensor alpha, Tensor log_s, Tensor log_base,"
      " float tau0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "cross_entropy_all(Tensor q, Tensor entity, Tensor target, str reduction, int block_rows,"
      " int block_cols) -> (Tensor, Tensor)");
  m.def(
      "cross_entropy_all_backward(Tensor grad, Tensor q, Tensor entity, Tensor target, Tensor lse,"
      " str reduction, int block_rows, int block_cols, bool need_q, bool need_entity) -> (Tensor, Tensor)");
  m.def(
      "cross_entropy_all_train(Tensor q, Tensor entity, Tensor target, str reduction, int block_rows,"
      " int block_cols, bool need_q, bool need_entity) -> (Tensor, Tensor, Tensor)");
  m.def(
      "filtered_rank_counts(Tensor q, Tensor entity, Tensor target, Tensor? target_score, Tensor filter_ptr,"
      " Tensor filter_idx, int entity_offset, int block_rows, int block_cols) -> (Tensor, Tensor)");
  m.def(
      "target_scores(Tensor q, Tensor entity, Tensor target, int entity_offset, int block_rows, int block_cols)"
      " -> Tensor");
  m.def("n3(Tensor x, str kind) -> Tensor");
  m.def("n3_backward(Tensor grad, Tensor x, str kind) -> Tensor");
}

#ifndef WITH_CUDA
// A build without CUDA still claims the CUDA dispatch key, so a CUDA tensor gets this message
// instead of the dispatcher's generic "could not run" (and never a silent fallback).
namespace {
void built_without_cuda(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, "rotmem was built without CUDA support: ", op.schema().name(),
              " got a CUDA tensor. Rebuild on a machine with the CUDA toolkit and a CUDA build of torch "
              "(ROTMEM_FORCE_CUDA=1 pip install --no-build-isolation -e .), or use ROTMEM_BACKEND=triton "
              "or ROTMEM_BACKEND=torch.");
}
}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  for (const char* name :
       {"rotate", "rotate_backward", "unrotated_query", "unrotated_query_backward", "unrotated_query_indexed",
        "unrotated_query_indexed_backward", "cross_entropy_all", "cross_entropy_all_backward",
        "cross_entropy_all_train", "filtered_rank_counts", "target_scores", "n3", "n3_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&built_without_cuda>());
  }
}
#endif

extern "C" {
// `import rotmem._C` loads this library, which registers the ops above; the module itself is empty
// but for WITH_CUDA (1 when the CUDA kernels were compiled in).
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  PyObject* module = PyModule_Create(&module_def);
#ifdef WITH_CUDA
  PyModule_AddIntConstant(module, "WITH_CUDA", 1);
#else
  PyModule_AddIntConstant(module, "WITH_CUDA", 0);
#endif
  return module;
}
}
