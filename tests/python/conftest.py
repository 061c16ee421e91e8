# SPDX-License-Identifier: MIT
import os
import sys

# Lets tests import the shared helpers as `helpers`.
sys.path.insert(0, os.path.dirname(__file__))
