"""Developer tools shipped with polyflow (`polyflow-opt`)."""
