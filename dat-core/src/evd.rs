//! The event dispatcher (EVD): events, the bounded queue and its wait/dequeue rules.
