"""`python -m fqntrace <verb>`: see fqntrace.cli."""
import sys

from fqntrace.cli import main

sys.exit(main())
