"""HTTP: the request pipeline of SPEC 2.1, the v1 and control routes, problem responses."""
