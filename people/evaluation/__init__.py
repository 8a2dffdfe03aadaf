"""The graded people benchmark (benchmark): queries drawn from the loaded directory, scored with the project's nDCG."""
