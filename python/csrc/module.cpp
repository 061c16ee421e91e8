// SPDX-License-Identifier: MIT
#include <exception>

#include "bindings.h"
#include "ir/errors.h"
#include "runtime/communicator.h"

namespace py = pybind11;

namespace {

// User errors become ValueError or TypeError, a peer that does not answer
// TimeoutError, anything else RuntimeError.
void translateException(std::exception_ptr error) {
  try {
    if (error) {
      std::rethrow_exception(error);
    }
  } catch (const mdfuser::UserError& e) {
    PyErr_SetString(
        e.kind() == mdfuser::UserError::Kind::kType ? PyExc_TypeError
                                                    : PyExc_ValueError,
        e.what());
  } catch (const mdfuser::CommunicationError& e) {
    PyErr_SetString(
        e.timedOut() ? PyExc_TimeoutError : PyExc_RuntimeError, e.what());
  } catch (const mdfuser::InternalError& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

} // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mdfuser's C++ core: the IR, the compiler and the runtime";
  py::register_exception_translator(translateException);
  mdfuser::python::bindIr(m);
  mdfuser::python::bindRuntime(m);
}
