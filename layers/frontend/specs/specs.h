// Every op's spec (Note [An op's spec beside the frontend] in spec_format.h): the families' headers, in
// the order layers/ops/operators.h includes the declarations. Read by the frontend's spec parser and help.
#pragma once

#include "layers/frontend/specs/spec_format.h"  // IWYU pragma: export
#include "layers/frontend/specs/gemm.h"  // IWYU pragma: export
#include "layers/frontend/specs/conv.h"  // IWYU pragma: export
#include "layers/frontend/specs/pointwise.h"  // IWYU pragma: export
#include "layers/frontend/specs/views.h"  // IWYU pragma: export
#include "layers/frontend/specs/gradients.h"  // IWYU pragma: export
#include "layers/frontend/specs/reductions.h"  // IWYU pragma: export
#include "layers/frontend/specs/copy.h"  // IWYU pragma: export
#include "layers/frontend/specs/inplace.h"  // IWYU pragma: export
#include "layers/frontend/specs/normalization.h"  // IWYU pragma: export
