"""The ground floor: frozen records and pure rules, the one error type, input guards, and costs as data (the cost
model, the machine's tables, a lane's speed, the quotes); nothing here loads a model or runs the loop."""
