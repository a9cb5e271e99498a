"""`python -m fqntrace <verb>`: see fqntrace.analysis.cli."""
import sys

from fqntrace.analysis.cli import main

sys.exit(main())
