/**
 * Work in progress by the issue-26 helper "i26-d" (blockAvailability and the eRPC integrity block).
 */
export {};
