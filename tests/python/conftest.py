# SPDX-License-Identifier: MIT
import os
import sys

# Lets tests import the shared helpers as `helpers`, and the examples (the
# transformer blocks) by their module names.
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
