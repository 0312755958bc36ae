"""Sans-I/O routing engines. See ``base`` for the API every engine implements."""
