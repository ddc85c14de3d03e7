"""EchoAI canvas and workflow JSON -> LangGraph graphs whose CrewAI agents have their tools bound."""
