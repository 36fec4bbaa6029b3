// The rotmem operator library: schemas of every op (torch.ops.rotmem.*) and the Python module
// rotmem._C that loads them. Kernels register themselves, one file per op and device
// (csrc/cpu/<op>.cpp, csrc/cuda/<op>.cu); autograd formulas and fake (meta) implementations are
// derived from each op's entry in rotmem/ops/registry.py.
#include <Python.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <string>
#include <string_view>

#include "cpu/isa.h"

namespace {
// The schema of every op: one entry per op (and one per backward). Each op's kernels register
// themselves, one file per op and device (csrc/cpu/<op>.cpp, csrc/cuda/<op>.cu); its fake and
// autograd formula come from its entry in rotmem/ops/registry.py.
constexpr const char* kSchemas[] = {
    "rotate(Tensor x, Tensor theta) -> Tensor",
    "rotate_backward(Tensor grad, Tensor x, Tensor theta) -> (Tensor, Tensor)",
    "unrotated_query(Tensor h, Tensor w, Tensor? w_hat, Tensor theta) -> Tensor",
    "unrotated_query_backward(Tensor grad, Tensor h, Tensor w, Tensor? w_hat, Tensor theta)"
    " -> (Tensor, Tensor, Tensor, Tensor)",
    "unrotated_query_indexed(Tensor entity, Tensor w_table, Tensor? w_hat_table, Tensor ent_idx,"
    " Tensor rel_idx, Tensor tau, Tensor alpha, Tensor log_s, Tensor log_base, float tau0,"
    " bool sparse_grad) -> Tensor",
    "unrotated_query_indexed_backward(Tensor grad, Tensor entity, Tensor w_table, Tensor? w_hat_table,"
    " Tensor ent_idx, Tensor rel_idx, Tensor tau, Tensor alpha, Tensor log_s, Tensor log_base,"
    " float tau0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "cross_entropy_all(Tensor q, Tensor entity, Tensor target, str reduction, int block_rows,"
    " int block_cols) -> (Tensor, Tensor)",
    "cross_entropy_all_backward(Tensor grad, Tensor q, Tensor entity, Tensor target, Tensor lse,"
    " str reduction, int block_rows, int block_cols, bool need_q, bool need_entity) -> (Tensor, Tensor)",
    "cross_entropy_all_train(Tensor q, Tensor entity, Tensor target, str reduction, int block_rows,"
    " int block_cols, bool need_q, bool need_entity) -> (Tensor, Tensor, Tensor)",
    "filtered_rank_counts(Tensor q, Tensor entity, Tensor target, Tensor? target_score, Tensor filter_ptr,"
    " Tensor filter_idx, int entity_offset, int block_rows, int block_cols) -> (Tensor, Tensor)",
    "target_scores(Tensor q, Tensor entity, Tensor target, int entity_offset, int block_rows, int block_cols)"
    " -> Tensor",
    "n3(Tensor x, str kind) -> Tensor",
    "n3_backward(Tensor grad, Tensor x, str kind) -> Tensor",
    "inner_products(Tensor vectors, Tensor queries) -> Tensor",  // CPU only: rotmem.index's flat scan
    "top_inner_products(Tensor vectors, Tensor codes, Tensor scales, Tensor errors, Tensor norms, Tensor queries,"
    " int k)"
    " -> (Tensor, Tensor)",  // CPU only: the flat scan's top k through an int8 copy
};
}  // namespace

TORCH_LIBRARY(rotmem, m) {
  m.set_python_module("rotmem.ops.native");
  for (const char* schema : kSchemas) m.def(schema);
}

#ifndef WITH_CUDA
// A build without CUDA still claims the CUDA dispatch key of every op in kSchemas, so a CUDA tensor
// gets this message instead of the dispatcher's generic "could not run" (and never a silent fallback).
namespace {
void built_without_cuda(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, "rotmem was built without CUDA support: ", op.schema().name(),
              " got a CUDA tensor. Rebuild on a machine with the CUDA toolkit and a CUDA build of torch "
              "(ROTMEM_FORCE_CUDA=1 pip install --no-build-isolation -e .), or use ROTMEM_BACKEND=triton "
              "or ROTMEM_BACKEND=torch.");
}
}  // namespace

TORCH_LIBRARY_IMPL(rotmem, CUDA, m) {
  for (const char* schema : kSchemas) {
    const std::string_view name(schema, std::strcspn(schema, "("));  // the op's name: up to its '('
    m.impl(std::string(name).c_str(), torch::CppFunction::makeFromBoxedFunction<&built_without_cuda>());
  }
}
#endif

// ---- the CPU instruction set (csrc/cpu/isa.h), from Python ------------------------------------
namespace {
using rotmem::cpu::Isa;

constexpr Isa kAllIsas[] = {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline};

PyObject* cpu_isa(PyObject*, PyObject*) { return PyUnicode_FromString(rotmem::cpu::isa_name(rotmem::cpu::active_isa())); }

// The sets this build and CPU can run, widest first.
PyObject* supported_cpu_isas(PyObject*, PyObject*) {
  PyObject* names = PyList_New(0);
  for (Isa isa : kAllIsas) {
    if (!rotmem::cpu::isa_supported(isa)) continue;
    PyObject* name = PyUnicode_FromString(rotmem::cpu::isa_name(isa));
    PyList_Append(names, name);
    Py_DECREF(name);
  }
  return names;
}

// set_cpu_isa("avx512" | "avx2" | "baseline" | "auto"): ValueError for an unknown name or a set the
// CPU (or this build) cannot run.
PyObject* set_cpu_isa(PyObject*, PyObject* arg) {
  const char* name = PyUnicode_AsUTF8(arg);
  if (name == nullptr) return nullptr;
  if (std::strcmp(name, "auto") == 0) {
    rotmem::cpu::set_active_isa(rotmem::cpu::best_isa());
    Py_RETURN_NONE;
  }
  for (Isa isa : kAllIsas) {
    if (std::strcmp(name, rotmem::cpu::isa_name(isa)) != 0) continue;
    if (!rotmem::cpu::isa_supported(isa)) {
      PyErr_Format(PyExc_ValueError, "CPU instruction set '%s' is not supported by this CPU (or build)", name);
      return nullptr;
    }
    rotmem::cpu::set_active_isa(isa);
    Py_RETURN_NONE;
  }
  PyErr_Format(PyExc_ValueError, "unknown CPU instruction set '%s'; expected avx512, avx2, baseline or auto", name);
  return nullptr;
}

PyMethodDef methods[] = {
    {"cpu_isa", cpu_isa, METH_NOARGS, "The instruction set the CPU kernels use now."},
    {"supported_cpu_isas", supported_cpu_isas, METH_NOARGS, "Instruction sets this build and CPU can run."},
    {"set_cpu_isa", set_cpu_isa, METH_O, "Force an instruction set: avx512, avx2, baseline or auto."},
    {nullptr, nullptr, 0, nullptr}};
}  // namespace

extern "C" {
// `import rotmem._C` loads this library, which registers the ops above. The module has WITH_CUDA
// (1 when the CUDA kernels were compiled in), COMPILED_CPU_ISAS (the instruction sets the CPU
// kernels were compiled for) and the three functions above.
PyMODINIT_FUNC PyInit__C(void) {
  // every field positionally (C++17: no designated initialisers): slots, traverse, clear, free unused
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods, nullptr, nullptr, nullptr, nullptr};
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
#ifdef WITH_CUDA
  PyModule_AddIntConstant(module, "WITH_CUDA", 1);
#else
  PyModule_AddIntConstant(module, "WITH_CUDA", 0);
#endif
#if ROTMEM_X86_ISAS
  PyModule_AddObject(module, "COMPILED_CPU_ISAS", Py_BuildValue("(sss)", "avx512", "avx2", "baseline"));
#else
  PyModule_AddObject(module, "COMPILED_CPU_ISAS", Py_BuildValue("(s)", "baseline"));
#endif
  return module;
}
}
