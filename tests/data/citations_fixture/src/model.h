// The model of SPEC.md section 2 (a contract outside the repository): one violation.
// Its math is in docs/guide.md#real-heading and docs/guide.md#real-heading-1 (both fine).
#pragma once
