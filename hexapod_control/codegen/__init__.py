"""Code generation of the Hexapod rigid-body dynamics and of the C control cycle (run ``python -m hexapod_control.codegen``).

Only this package needs SymPy; the generated module is plain Python (``math`` only).
"""
