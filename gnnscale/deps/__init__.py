"""Dependency managers: DepCache, DepComm and the NeutronStar hybrid."""
