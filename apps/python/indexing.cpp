// x[index] in the extension: _strata._index(tensor, index), the walk over a basic index that
// strata/_views.py's _getitem does in Python, done here (Note [Indexing in the extension]).
#include <Python.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <limits>
#include <span>

#include "apps/python/crossing.h"
#include "apps/python/profile.h"
#include "layers/binding/binding.h"

namespace py = pybind11;

namespace strata::python {
namespace {

// Note [Indexing in the extension]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// x[1] and x[:, ::2] are basic indexing: each int a select, each slice a slice (a full ':' is no call),
// each None an unsqueeze, one Ellipsis standing for the dims no other item takes. strata/_views.py
// walks the index in Python; torch walks it in C++ (THPVariable_getitem), and the Python walk alone cost
// more than the views it calls (~800 ns of x[:, ::2]'s 1250: docs/performance.md, "Views from Python
// against torch's"). _index walks it here and calls the same three operators through the binding layer,
// boxed as the hot entry boxes them (box_argument), so that the result, the operators' errors and the
// dispatcher's rows are the Python walk's. Three rules keep the rest the same:
//   - It takes only what it can walk exactly as _views.py does: ints (an exact int, or another
//     numbers.Integral such as numpy's ints, read through __index__ as int() reads them), slices whose
//     members are None or such ints, None, Ellipsis, and exact tuples of them. Anything else (a bool, a
//     Tensor, a float, a list, a slice of floats) and more than kMaxItems items return None before any
//     operator is called, and _getitem runs the Python walk, which raises its own TypeError (or, for
//     the odd inputs it takes, does what it always did).
//   - The checks come in the Python walk's order: more than one Ellipsis, then too many indices, then
//     each item in turn; a lone int is boxed before the 0-d check, as _getitem's int fast path does.
//   - Intermediate views stay C++ tensors; only the result becomes a Python object, and an index that
//     calls nothing (x[:], x[...]) returns x itself, as the Python walk does.
// While the python and pybind11 rows are on, _getitem does not come here (strata/_views.py says why).
constexpr size_t kMaxItems = 16;  // far past any index a 4-dim tensor takes; longer ones walk in Python
constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();  // slice's default end (its schema)

enum class Item { kNone, kEllipsis, kInt, kSlice, kOther };

// The three operators an index calls, looked up once.
struct IndexOperators {
  const binding::BoundOperator& select = binding::find_operator("select");
  const binding::BoundOperator& slice = binding::find_operator("slice");
  const binding::BoundOperator& unsqueeze = binding::find_operator("unsqueeze");
};
const IndexOperators& index_operators() {
  static const IndexOperators kOperators;
  return kOperators;
}

// numbers.Integral, what _views.py takes beyond int (numpy registers its ints there). Held for the life
// of the process, as crossing.cpp's exception classes are.
PyObject* integral_class() {
  static PyObject* const kIntegral = [] {
    PyObject* numbers = PyImport_ImportModule("numbers");
    if (numbers == nullptr) throw py::error_already_set();
    PyObject* integral = PyObject_GetAttrString(numbers, "Integral");
    Py_DECREF(numbers);
    if (integral == nullptr) throw py::error_already_set();
    return integral;
  }();
  return kIntegral;
}

// An int as _views.py takes one: an exact int, or a numbers.Integral that is not a bool. The exact
// types are tested first: the isinstance against the ABC is the slow case (numpy's ints).
bool is_integral(PyObject* value) {
  if (PyLong_CheckExact(value)) return true;
  if (PyBool_Check(value)) return false;
  if (PyLong_Check(value)) return true;
  if (value == Py_None || value == Py_Ellipsis || PySlice_Check(value) || PyTuple_Check(value)) return false;
  const int integral = PyObject_IsInstance(value, integral_class());
  if (integral < 0) throw py::error_already_set();
  return integral == 1;
}

Item classify(PyObject* item) {
  if (PyLong_CheckExact(item)) return Item::kInt;
  if (item == Py_None) return Item::kNone;
  if (item == Py_Ellipsis) return Item::kEllipsis;
  if (PySlice_Check(item)) {
    const auto* s = reinterpret_cast<PySliceObject*>(item);
    for (PyObject* member : {s->start, s->stop, s->step})
      if (member != Py_None && !is_integral(member)) return Item::kOther;
    return Item::kSlice;
  }
  return is_integral(item) ? Item::kInt : Item::kOther;
}

// An int item or slice member boxed as argument `position` of `op`: an exact int as the hot entry boxes
// it, another Integral through __index__ first (the Python walk's int(it)).
binding::IValue box_int(PyObject* value, const binding::BoundOperator& op, size_t position) {
  if (PyLong_CheckExact(value)) return box_argument(value, op.schema(), position);
  const py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(value));
  if (!as_int) throw py::error_already_set();
  return box_argument(as_int.ptr(), op.schema(), position);
}

template <size_t N>
binding::IValue call_view(const binding::BoundOperator& op, std::array<binding::IValue, N>&& args) {
  note_arguments(op, args);  // strata.profile()'s header, as the hot entry notes it; one check when not
  return op.call(args);
}

// One slice item on `dim`; returns whether it called an operator. A full ':' is no call; otherwise
// slice(out, dim, start, end, step), with slice's defaults for the members that are None. The members
// are boxed in the schema's order, so an int past int64 names the first such member, as the Python
// walk's call does.
bool apply_slice(binding::IValue& out, int64_t dim, PyObject* item) {
  const binding::BoundOperator& slice = index_operators().slice;
  const auto* s = reinterpret_cast<PySliceObject*>(item);
  const std::array<PyObject*, 3> members = {s->start, s->stop, s->step};
  const std::array<int64_t, 3> defaults = {0, kSliceEnd, 1};
  std::array<int64_t, 3> values{};
  for (size_t i = 0; i < 3; ++i)
    values[i] = members[i] == Py_None ? defaults[i] : box_int(members[i], slice, i + 3).to_int();
  if (values == defaults) return false;
  out = call_view<5>(slice, {std::move(out), binding::IValue(dim), binding::IValue(values[0]),
                             binding::IValue(values[1]), binding::IValue(values[2])});
  return true;
}

// The walk from `out` (the indexed tensor, boxed), once every item is known to be one the extension
// takes (kinds[i] for items[i]). Returns the result: `self` itself when no operator was called, nullptr
// with the Python error set for a refusal.
PyObject* walk(PyObject* self, binding::IValue out, std::span<PyObject* const> items, std::span<const Item> kinds) {
  const IndexOperators& ops = index_operators();
  int ellipses = 0, consumed = 0;
  for (const Item kind : kinds) {
    if (kind == Item::kEllipsis) ++ellipses;
    else if (kind != Item::kNone) ++consumed;
  }
  if (ellipses > 1) {
    PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
    return nullptr;
  }
  const int ndim = out.tensor().dim();
  if (consumed > ndim) {
    PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d (got %d)", ndim, consumed);
    return nullptr;
  }
  bool called = false;
  int64_t dim = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    switch (kinds[i]) {
      case Item::kEllipsis: dim += ndim - consumed; break;
      case Item::kNone:
        out = call_view<2>(ops.unsqueeze, {std::move(out), binding::IValue(dim)});
        called = true;
        ++dim;
        break;
      case Item::kInt:
        out = call_view<3>(ops.select, {std::move(out), binding::IValue(dim), box_int(items[i], ops.select, 3)});
        called = true;
        break;
      case Item::kSlice:
        called = apply_slice(out, dim, items[i]) || called;
        ++dim;
        break;
      case Item::kOther: break;  // never here: index_entry hands such an index to the Python walk
    }
  }
  if (!called) {
    Py_INCREF(self);
    return self;
  }
  return new_tensor_object(std::move(out).take_tensor());
}

// _index(tensor, index): x[index] (strata/_views.py's _getitem), or None when the index holds an item
// this walk does not take (Note [Indexing in the extension]).
PyObject* index_entry(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
  try {
    if (argc != 2) {
      PyErr_Format(PyExc_TypeError, "_index(tensor, index) takes 2 arguments, got %zd", argc);
      return nullptr;
    }
    PyObject* self = argv[0];
    PyObject* index = argv[1];
    const IndexOperators& ops = index_operators();
    binding::IValue tensor = box_argument(self, ops.select.schema(), 1);
    if (!tensor.is_tensor()) {
      PyErr_Format(PyExc_TypeError, "_index(tensor, index): tensor must be a strata.Tensor, not %s",
                   Py_TYPE(self)->tp_name);
      return nullptr;
    }
    if (PyLong_CheckExact(index)) {
      // _getitem's int fast path: the int is boxed (an int past int64 raises) before the 0-d check.
      binding::IValue i = box_argument(index, ops.select.schema(), 3);
      if (tensor.tensor().dim() > 0)
        return new_tensor_object(call_view<3>(ops.select, {std::move(tensor), binding::IValue(int64_t(0)), std::move(i)})
                               .take_tensor());
    }
    const bool tuple = PyTuple_CheckExact(index);
    const size_t n = tuple ? size_t(PyTuple_GET_SIZE(index)) : 1;
    if (n > kMaxItems) Py_RETURN_NONE;
    const std::span<PyObject* const> items(tuple ? &PyTuple_GET_ITEM(index, 0) : &argv[1], n);
    std::array<Item, kMaxItems> kinds{};
    for (size_t i = 0; i < n; ++i) {
      kinds[i] = classify(items[i]);
      if (kinds[i] == Item::kOther) Py_RETURN_NONE;
    }
    return walk(self, std::move(tensor), items, std::span<const Item>(kinds.data(), n));
  } catch (...) {
    set_error_in_flight();
    return nullptr;
  }
}

PyMethodDef g_index_methods[] = {
    {"_index", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&index_entry)), METH_FASTCALL,
     "_index(tensor, index): x[index] walked in C++, or None for an index the Python walk takes "
     "(Note [Indexing in the extension])"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_indexing(py::module_& m) {
  if (PyModule_AddFunctions(m.ptr(), g_index_methods) < 0) throw py::error_already_set();
}

}  // namespace strata::python
