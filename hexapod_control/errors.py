"""Exceptions of the package: every bad input ends in one of these, never in a wrong number.

The one error tree: every public exception class of the package is defined here, derives from
HexapodError, and is re-exported by the package root (test/test_errors.py checks both). A class
that used to derive from a builtin keeps it as a second base, so older ``except`` clauses still
match. Only module-private signals that never leave their module (``_Name``) live elsewhere.
"""


class HexapodError(Exception):
    """Base class of every error raised by hexapod_control."""


class ParameterError(HexapodError, ValueError):
    """A parameters file or object is missing a key, has a wrong type, unit, sign or value."""


class InvalidInputError(HexapodError, ValueError):
    """A joint vector, pose or message has the wrong shape, or holds NaN or inf."""


class UnreachablePoseError(HexapodError, ValueError):
    """No leg configuration realises the requested platform pose."""


class AssemblyError(HexapodError):
    """The closed chains cannot assemble for these actuator positions (e.g. q_bar_i >= 2L)."""


class ConvergenceError(HexapodError):
    """The numeric forward kinematics did not converge to the required closure residual."""


class AssemblyModeJumpError(HexapodError):
    """The forward kinematics converged, but to an assembly mode other than the physical one."""


class SingularityError(HexapodError):
    """A configuration is too close to a singularity for the requested computation."""


class SimulationDivergedError(HexapodError):
    """A simulated plant left the physically meaningful region (NaN, runaway speed, open loops)."""


class CompilationError(HexapodError, RuntimeError):
    """The C backend cannot be used: no compiler, compilation failed, or the library is stale.

    Still a RuntimeError, as before it joined this tree, for ``except RuntimeError`` callers."""


class BagError(HexapodError):
    """A bag cannot be opened or read at all, or holds too little to work with (one-line reason)."""


class StackStalledError(HexapodError):
    """A lockstep stage of the simulated ROS stack did not complete in time (a node died or discovery failed)."""


class BoardError(HexapodError):
    """A drive's board refused an operation (a HIL error, a closed board)."""
