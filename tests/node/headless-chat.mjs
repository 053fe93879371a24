// The real `ai` client's `AbstractChat` with the smallest `ChatState`: what a framework binding
// (React, Vue, Svelte) keeps reactive, kept here in plain fields. Shared by the test scripts.

import { AbstractChat } from 'ai';

class State {
  status = 'ready';
  error = undefined;
  messages;
  constructor(messages = []) {
    this.messages = messages;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };
  snapshot = (thing) => structuredClone(thing);
}

/**
 * A chat as `useChat` holds one, without a framework. `onChange(messages)`, if given, is called
 * after every change to the messages (where a framework would re-render).
 */
export class Chat extends AbstractChat {
  constructor({ onChange, messages, ...init }) {
    // As a framework's state does, it starts from the `messages` given (a chat reopened).
    const state = new State(messages);
    if (onChange) {
      for (const change of ['pushMessage', 'popMessage', 'replaceMessage']) {
        const apply = state[change];
        state[change] = (...args) => {
          apply(...args);
          onChange(state.messages);
        };
      }
    }
    super({ ...init, state });
  }
}
