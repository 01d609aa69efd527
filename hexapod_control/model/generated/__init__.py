"""Generated code (see hexapod_control.codegen); do not edit by hand."""
