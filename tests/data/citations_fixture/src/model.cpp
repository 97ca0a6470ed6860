// A heading inside a code fence is no heading: docs/guide.md#not-a-heading-inside-a-code-fence.
// A doc the tree lacks: docs/missing.md#anything.
// Fine: docs/guide.md, guide.md of [guide.md](../docs/guide.md), https://example.com/README.md.
#include "src/model.h"
